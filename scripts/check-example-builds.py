#!/usr/bin/env python3
"""Checks that each example server builds only its own runtime's crates.

Every example server is in a package of its own, one per runtime (`crates/lameduck-examples-*`,
found from the workspace root through its `default-members`), which depends on the servers'
shared code (`crates/lameduck-examples`) and its runtime's framework alone. So
`cargo run --release --example tokio_server` must not build actix-web, tonic or smol, and so on.
This script builds each server as the README runs it (`cargo build --release --example NAME`
at the root; quick when it is already built, cargo then reports every unit as fresh), lists the
packages of the units it built, and fails when a package of another runtime is among them, when
the example is not its runtime's package's, or when there are more than `--max-packages`.

Usage: python3 scripts/check-example-builds.py [--max-packages N] [NAME ...]
       (default: every example server)
"""

import argparse
import json
import os
import subprocess
import sys

# The packages of each runtime's framework, with the package holding its examples.
FRAMEWORKS = {
    "actix-web": ["lameduck-examples-actix", "lameduck-actix", "actix-web", "actix-http",
                  "actix-server", "actix-ws"],
    "tonic": ["lameduck-examples-grpc", "lameduck-tonic", "tonic", "tonic-health", "tonic-prost",
              "prost"],
    "smol": ["lameduck-examples-smol", "lameduck-smol", "smol", "async-executor",
             "async-tungstenite"],
    "axum": ["lameduck-examples-axum", "axum"],
}

# Example server -> (its package, the frameworks it must not build, the most packages it may
# build: about 10 % above today's count, so that a new heavy dependency is noticed).
SERVERS = {
    "tokio_server": ("lameduck-examples-tokio", ["actix-web", "tonic", "smol", "axum"], 150),
    "axum_server": ("lameduck-examples-axum", ["actix-web", "tonic", "smol"], 155),
    "smol_server": ("lameduck-examples-smol", ["actix-web", "tonic", "axum"], 175),
    "actix_server": ("lameduck-examples-actix", ["tonic", "smol", "axum"], 225),
    # tonic's router is axum's, so grpc_server builds axum (not axum_server's package).
    "grpc_server": ("lameduck-examples-grpc", ["actix-web", "smol"], 170),
}


def package_name(package_id):
    """The name in a cargo package id: "path+file:///...#name@version",
    "registry+...#name@version" or "path+file:///.../name#version"."""
    name = package_id.rsplit("#", 1)[-1].split("@", 1)[0]
    if name and name[0].isdigit():
        name = package_id.rsplit("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return name


def built_packages(root, example):
    """The packages of the units `cargo build --release --example EXAMPLE` builds, and the
    package of the example itself; None when the build fails."""
    cmd = ["cargo", "build", "--release", "--example", example, "--message-format=json"]
    proc = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {proc.returncode}", file=sys.stderr)
        return None
    packages, owner = set(), None
    for line in proc.stdout.splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact":
            continue
        name = package_name(message["package_id"])
        packages.add(name)
        target = message.get("target", {})
        if target.get("name") == example and "example" in target.get("kind", []):
            owner = name
    return packages, owner


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-packages", type=int,
                        help="the most packages any example server may build (default: each "
                             "server's own bound, 150 for tokio_server to 225 for actix_server)")
    parser.add_argument("servers", nargs="*", metavar="NAME",
                        help=f"example servers to check (default: {' '.join(SERVERS)})")
    args = parser.parse_args()
    unknown = [s for s in args.servers if s not in SERVERS]
    if unknown:
        parser.error(f"unknown example server {', '.join(unknown)} (known: {', '.join(SERVERS)})")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    failed = False
    for server in args.servers or SERVERS:
        package, frameworks, most = SERVERS[server]
        most = args.max_packages or most
        built = built_packages(root, server)
        if built is None:
            failed = True
            continue
        packages, owner = built
        print(f"cargo build --release --example {server} builds {len(packages)} packages")
        problems = []
        for framework in frameworks:
            unwanted = sorted(p for p in packages if p in FRAMEWORKS[framework])
            if unwanted:
                problems.append(f"{server} builds {framework}'s {', '.join(unwanted)}")
        if owner != package:
            problems.append(f"{server} is {owner or 'no package'}'s example, not {package}'s")
        if len(packages) > most:
            problems.append(f"{server} builds more than {most} packages: "
                            f"{' '.join(sorted(packages))}")
        for problem in problems:
            print(f"FAIL: {problem}", file=sys.stderr)
        if problems:
            failed = True
        else:
            print(f"ok: {server} ({package}) builds none of {', '.join(frameworks)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
