# Seed 004, "multipart/form-data": the keys the seed reads, returned as JSON.
def handler(request, context):
    contents = request['contents']
    return {
        'status_code': 200,
        'content_type': 'application/json',
        'content': {
            'is_dict': isinstance(request, dict),
            'http_method': request['http_method'],
            'content_type': request['content_type'],
            'parts': [[c['content_type'], c['form_name'], c['file_name'], c.read().decode('latin-1')] for c in contents],
            'env': {k: __import__('os').environ.get(k) for k in ('ABEJA_ORGANIZATION_ID', 'TRAINING_JOB_ID', 'HANDLER')},
        },
    }
