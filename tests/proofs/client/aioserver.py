"""An aiohttp server that is not lameduck and sheds load the way many services do: every
--every'th request is answered `429 Too Many Requests` with `Retry-After` (seconds, or an
HTTP-date every other time) and not processed; the others are processed and answered 200.
Each processed request's `x-request-id` is appended to --record, one line each.

`python3 tests/proofs/client/aioserver.py --listen 127.0.0.1:0 --record ids.txt`

Routes: GET / (and any other GET path) and POST of any path (the body read whole). The first
line on stdout, once listening: "listening on http://127.0.0.1:PORT". SIGTERM ends it.
"""

import argparse
import asyncio
import email.utils
import signal
import socket
import sys
import time

from aiohttp import web


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--record", help="append each processed request's id to this file")
    p.add_argument("--every", type=int, default=4, help="answer every Nth request 429")
    p.add_argument("--retry-after", type=int, default=1, help="seconds asked for")
    args = p.parse_args()
    record = open(args.record, "a", buffering=1) if args.record else None
    seen = {"n": 0}

    async def handle(request):
        seen["n"] += 1
        n = seen["n"]
        if request.method == "POST":
            await request.read()
        if n % args.every == 0:
            if n % (2 * args.every) == 0:
                # An HTTP-date one second later than asked for rounds up: never sooner than asked.
                after = email.utils.formatdate(time.time() + args.retry_after + 1, usegmt=True)
            else:
                after = str(args.retry_after)
            return web.Response(status=429, text="slow down\n", headers={"Retry-After": after})
        rid = request.headers.get("x-request-id")
        if record and rid:
            record.write(rid + "\n")
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    host, port = args.listen.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))

    async def serve():
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.SockSite(runner, sock)
        await site.start()
        print(f"listening on http://{host}:{sock.getsockname()[1]}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(serve())
    if record:
        record.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
