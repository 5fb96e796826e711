"""The image example of ABEJA Platform docs, *Model handler function for 19.04+*: return the posted image mirrored left to right, as a JPEG.

The example used OpenCV's ``cv2.flip(img, 1)``; ``numpy.fliplr`` is the same operation without
the extra dependency.
"""

import http
from io import BytesIO

import numpy as np
from PIL import Image


def handler(request, context):
    data = request.read()
    imgfile = BytesIO(data)
    img_pil = Image.open(imgfile)
    img_numpy = np.asarray(img_pil)
    flipped_array = np.fliplr(img_numpy)
    flipped_image = Image.fromarray(flipped_array)
    ret_bytes = BytesIO()
    flipped_image.save(ret_bytes, format="JPEG", quality=95)
    ret_bytes.seek(0)
    return {
        "status_code": http.HTTPStatus.OK,
        "content_type": "image/jpeg",
        "content": ret_bytes,
    }
