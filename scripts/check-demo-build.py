#!/usr/bin/env python3
"""Checks that the README's demo command builds only what the demo needs.

`cargo run --example demo` at the workspace root builds the `lameduck-demo` package's example:
the core, lameduck-hyper, lameduck-tokio, tokio and hyper, plus what the example servers' packages
(the other default members) turn on in them through cargo's feature unification (TLS, metrics).
It must not build the other runtimes, tonic or the Prometheus exporter, which only the example
servers use. This script builds the demo as the README does (`cargo build --example demo`, quick
when it is already built: cargo then reports every unit as fresh), lists the packages of the
units it built, and fails when one of those packages is among them or when there are more than
`--max-packages`.

Usage: python3 scripts/check-demo-build.py [--max-packages N]
"""

import argparse
import json
import os
import subprocess
import sys

# Packages only the example servers, the quick starts or the black-box tests need.
NOT_FOR_THE_DEMO = [
    "lameduck-suite",
    "lameduck-examples",
    "lameduck-examples-tokio",
    "lameduck-examples-axum",
    "lameduck-examples-smol",
    "lameduck-examples-actix",
    "lameduck-examples-grpc",
    "lameduck-actix",
    "lameduck-smol",
    "lameduck-tonic",
    "actix-web",
    "smol",
    "async-executor",
    "tonic",
    "prost",
    "axum",
    "clap",
    "metrics-exporter-prometheus",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-packages", type=int, default=100,
                        help="the most packages the demo may build (default 100; 99 today)")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        ["cargo", "build", "--example", "demo", "--message-format=json"],
        cwd=root, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        print(f"FAIL: cargo build --example demo exited {proc.returncode}", file=sys.stderr)
        return 1
    packages = set()
    for line in proc.stdout.splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") == "compiler-artifact":
            # "path+file:///...#name@version", "registry+...#name@version" or "...#version".
            package_id = message["package_id"]
            name = package_id.rsplit("#", 1)[-1].split("@", 1)[0]
            if name and name[0].isdigit():
                name = package_id.rsplit("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            packages.add(name)
    unwanted = sorted(p for p in packages if p in NOT_FOR_THE_DEMO)
    print(f"cargo build --example demo builds {len(packages)} packages")
    if unwanted:
        print(f"FAIL: the demo builds {', '.join(unwanted)}", file=sys.stderr)
        return 1
    if len(packages) > args.max_packages:
        print(f"FAIL: more than {args.max_packages} packages: {' '.join(sorted(packages))}",
              file=sys.stderr)
        return 1
    if "lameduck-demo" not in packages:
        print("FAIL: the demo example is not lameduck-demo's", file=sys.stderr)
        return 1
    print("ok: none of " + ", ".join(NOT_FOR_THE_DEMO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
