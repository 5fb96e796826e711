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

function start() {
  const key = keyForm(() => start());
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
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
      if (response.status === 401) document.getElementById("key-state").textContent = "401: enter the API key";
      return response;
    },
  });
}

start();
