"""Describe every part of a multipart/form-data request: form name, file name, type, size, SHA-256."""

import hashlib
import http


def handler(request, context):
    if "contents" not in request:
        return {
            "status_code": http.HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            "content_type": "application/json",
            "content": {"message": f"expected multipart/form-data, got {request['content_type']}"},
        }
    parts = []
    for content in request["contents"]:
        body = content.read()
        parts.append(
            {
                "form_name": content["form_name"],
                "file_name": content["file_name"],
                "content_type": content["content_type"],
                "size": len(body),
                "sha256": hashlib.sha256(body).hexdigest(),
            }
        )
    return {
        "status_code": http.HTTPStatus.OK,
        "content_type": "application/json",
        "content": {"parts": parts},
        "metadata": {"x-parts": len(parts)},
    }
