"""Event-loop CPU per S3 request, in process: bare aiohttp, `S3Transport`, `StoreIO`.

At 0 ms the cloud path is bound by the client's event loop, and `bench_cloud` cannot
tell a few microseconds per request from the host's noise. This benchmark measures the
loop thread's CPU (``time.thread_time``, user and system from ``getrusage``) per request
of ``--requests`` GETs or PUTs of ``--size`` bytes gathered at once against SeaweedFS
directly (started here, no delay proxy), through three layers in the same process and
rounds: ``bare`` (aiohttp on the transport's own session, signed with `sign_v4`, the body
read by aiohttp), ``transport`` (`S3Transport.get_into`) and ``storeio``
(`StoreIO.get_into` / `StoreIO.set`: budget, timeout, stats). Differences between the
layers in one process are what each costs; compare versions by running it with
``PYTHONPATH`` at each checkout, interleaved (figures move 20-30 % between processes on a
loaded host; take minima or medians over several).

    python -m benchmarks.bench_s3_loop --size 4096 --rounds 12
    PYTHONPATH=/tmp/base python -m benchmarks.bench_s3_loop --size 1048576

Figures: ``benchmarks/README.md``, "Per-request loop CPU of S3 GETs and PUTs at 0 ms".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def measure(
    endpoint: str, key: str, secret: str, bucket: str, n: int, size: int, rounds: int
) -> dict[str, Any]:
    from azarr.scheduler import StoreIO
    from azarr.storage import S3Store
    from azarr.storage._s3_transport import sign_v4

    store = S3Store(
        f"{bucket}/loop{size}", storage_options={"endpoint_url": endpoint, "key": key, "secret": secret}
    )
    io = StoreIO(store)
    transport = store._transport
    assert transport is not None
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    await asyncio.gather(*(io.set(f"c/{i}", payload) for i in range(n)))
    session = await transport.session()
    resolved = transport._resolved
    assert resolved is not None
    frozen = resolved.credentials.get_frozen_credentials()
    buffers = [bytearray(size) for _ in range(n)]

    def into(i: int) -> Callable[[int], memoryview]:
        return lambda nbytes: memoryview(buffers[i])[:nbytes]

    async def bare(i: int) -> bytes:
        path = f"{resolved.path_prefix}loop{size}/c/{i}"
        headers = sign_v4(
            "GET",
            path,
            {"host": resolved.host},
            payload_hash="UNSIGNED-PAYLOAD",
            access_key=frozen.access_key,
            secret_key=frozen.secret_key,
            token=frozen.token,
            region=resolved.region,
            amz_date=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
        )
        async with session.get(resolved.origin + path, headers=headers) as resp:
            return await resp.read()

    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "get bare": lambda: asyncio.gather(*(bare(i) for i in range(n))),
        "get transport": lambda: asyncio.gather(*(transport.get_into(f"c/{i}", into(i)) for i in range(n))),
        "get storeio": lambda: asyncio.gather(*(io.get_into(f"c/{i}", into(i)) for i in range(n))),
        "put storeio": lambda: asyncio.gather(*(io.set(f"c/{i}", payload) for i in range(n))),
    }
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            before, cpu = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
            await run()
            cpu, after = time.thread_time() - cpu, resource.getrusage(resource.RUSAGE_THREAD)
            samples[name].append(
                (
                    cpu / n * 1e6,
                    (after.ru_utime - before.ru_utime) / n * 1e6,
                    (after.ru_stime - before.ru_stime) / n * 1e6,
                )
            )
    await store.close()
    return {
        name: {
            "cpu_us_min": round(min(s[0] for s in runs), 1),
            "cpu_us_median": round(statistics.median(s[0] for s in runs), 1),
            "user_us_median": round(statistics.median(s[1] for s in runs), 1),
            "sys_us_median": round(statistics.median(s[2] for s in runs), 1),
        }
        for name, runs in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=256, help="requests gathered at once (default 256)")
    parser.add_argument("--size", type=int, default=4096, help="object size in bytes (default 4096)")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    from tests.servers import start_seaweedfs

    server = start_seaweedfs()
    try:
        bucket = server.create_bucket()
        result = asyncio.run(
            measure(
                server.endpoint_url, server.key, server.secret, bucket, args.requests, args.size, args.rounds
            )
        )
    finally:
        server.stop()
    print(
        json.dumps({"requests": args.requests, "size": args.size, "rounds": args.rounds, **result}, indent=2)
    )


if __name__ == "__main__":
    main()
