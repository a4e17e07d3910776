"""obstore's ``S3Store`` as the benchmarks' zarr-python 3 peers open SeaweedFS (plain HTTP,
path-style, static keys). Imported in the peer venvs: it needs only obstore."""

from __future__ import annotations

from typing import Any


def obstore_s3(bucket: str, prefix: str, endpoint: str, key: str, secret: str) -> Any:
    """``obstore.store.S3Store`` on ``bucket``/``prefix`` at ``endpoint``."""
    from obstore.store import S3Store

    return S3Store(
        bucket,
        prefix=prefix,
        endpoint=endpoint,
        access_key_id=key,
        secret_access_key=secret,
        region="us-east-1",
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )
