// Swagger UI on /openapi.json; every request (the document's too) carries the key saved below.
"use strict";
const KEY_STORE = "localserve.api_key";

function savedKey() {
  try { return localStorage.getItem(KEY_STORE) || ""; } catch (e) { return ""; }
}

function keyForm(onSave) {
  const input = document.getElementById("api-key");
  const state = document.getElementById("key-state");
  input.value = savedKey();
  state.textContent = input.value ? "key saved" : "";
  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    try { localStorage.setItem(KEY_STORE, input.value); } catch (e) { /* private mode: kept for this page */ }
    state.textContent = input.value ? "key saved" : "no key";
    onSave();
  });
  return () => input.value;
}

// Swagger UI on /openapi.json; started again when a key is saved. The document itself needs the key
// when the server has one: Swagger UI would only say "Failed to load API definition", so ask first.
async function start() {
  const value = key();
  const state = document.getElementById("key-state");
  const probe = await fetch("openapi.json", { headers: value ? { Authorization: "Bearer " + value } : {}, cache: "no-store" });
  if (probe.status === 401) {
    state.textContent = value ? "401: the key is wrong" : "401: this server needs an API key; enter it";
    document.getElementById("api-key").focus();
    return;
  }
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    tryItOutEnabled: true,
    displayRequestDuration: true,
    persistAuthorization: true,
    validatorUrl: null,
    requestInterceptor: (request) => {
      const value = key();
      if (value && !request.headers.Authorization) request.headers.Authorization = "Bearer " + value;
      return request;
    },
    responseInterceptor: (response) => {
      if (response.status === 401) state.textContent = "401: enter the API key";
      return response;
    },
  });
}

const key = keyForm(start);
start();
