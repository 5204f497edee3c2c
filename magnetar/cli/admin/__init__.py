"""``magnetar admin ...``: the common ``pulsar-admin`` verbs, over the admin HTTP API at ``--admin-url``.

Groups and verbs keep pulsar-admin's names and flags (``topics create-partitioned-topic -p 4 NAME``,
``namespaces set-retention --time 1h --size 1G NS``...). Lists print one item a line and objects as indented
JSON, as pulsar-admin does. Exit codes: 0 done, 1 refused by the broker or unreachable, 2 bad usage.
Plain ``urllib``: no client library, one request per verb.

The verb families live beside this module (``verbs``: the common ones; ``policies``; ``schemas``;
``audit``), each built on ``base``; this module gathers them into the parser and runs the chosen one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import urllib.error
from collections.abc import Sequence

from magnetar.cli.admin.audit import add_audit_parser
from magnetar.cli.admin.base import Call, HttpError, UsageError, request
from magnetar.cli.admin.connection import (
    AdminConnection,
    ConnectionSettingsError,
    add_connection_options,
    connection_from_args,
)
from magnetar.cli.admin.messages import format_message
from magnetar.cli.admin.policies import policy_verbs
from magnetar.cli.admin.schemas import schema_verbs
from magnetar.cli.admin.verbs import VERBS

__all__ = ["add_admin_parser", "main", "run_admin"]


def add_admin_parser(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``admin`` with its groups and verbs to the ``magnetar`` parser."""
    admin = verbs.add_parser("admin", help="manage a broker like pulsar-admin")
    add_connection_options(admin)
    # a metavar keeps the usage line short: an unknown verb's error lists the choices once
    groups = admin.add_subparsers(dest="group", required=True, metavar="GROUP")
    parsers: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for v in [*VERBS, *schema_verbs(), *policy_verbs()]:
        if v.group not in parsers:
            parsers[v.group] = groups.add_parser(v.group).add_subparsers(dest="admin_verb", required=True,
                                                                          metavar="VERB")
        p = parsers[v.group].add_parser(v.names[0], aliases=list(v.names[1:]), help=v.help)
        for flags, options in v.specs:
            p.add_argument(*flags, **options)
        p.set_defaults(admin_build=v.build)
    add_audit_parser(groups)


def _print(status: int, body: bytes, headers: dict[str, str], raw: bool) -> None:
    if raw:
        print(format_message(headers, body))
        return
    if status == 204 or not body.strip():
        return
    try:
        value = json.loads(body)
    except ValueError:
        print(body.decode(errors="replace"))
        return
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        for item in value:
            print(item)
    else:
        print(json.dumps(value, indent=2))


def run_admin(args: argparse.Namespace) -> int:
    """Run one admin verb; 0 done, 1 refused or unreachable, 2 bad usage."""
    if getattr(args, "audit_run", None) is not None:
        code = int(args.audit_run(args))
        if code >= 0:
            return code
        fix = {"fix": "true"} if args.fix else None
        args.admin_build = lambda a: Call("POST" if fix else "GET", "/admin/v2/broker-stats/ledger-audit", query=fix)
    conn = AdminConnection()
    try:
        conn = args.admin_conn = connection_from_args(args)  # verbs that first read something use it too
        built = args.admin_build(args)
        for number, call in enumerate(built if isinstance(built, list) else [built]):
            try:
                status, body, headers = request(conn, call)
            except HttpError as exc:
                if call.raw and number > 0 and exc.status == 404:
                    break  # peek -n N: print what exists, as pulsar-admin does, when fewer are there
                raise
            _print(status, body, headers, call.raw)
            if call.done is not None and not body.strip():
                print(call.done)
    except (UsageError, ConnectionSettingsError) as exc:
        print(f"magnetar admin: {exc}", file=sys.stderr)
        return 2
    except HttpError as exc:
        print(f"{exc.reason}\n\nReason: HTTP {exc.status} {exc.reason}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader (| head) has gone: stop quietly, as a pipeline expects
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (urllib.error.URLError, OSError) as exc:
        print(f"magnetar admin: cannot reach {conn.url}: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="magnetar")
    add_admin_parser(parser.add_subparsers(dest="verb", required=True))
    return run_admin(parser.parse_args(["admin", *(argv or [])]))
