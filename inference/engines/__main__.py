"""Serving engines from the command line:

    python -m inference.engines llamacpp build                      # llama-server + llama-quantize, into the cache
    python -m inference.engines llamacpp convert [MODEL] --type q8_0 # GGUF of the bundled model or a local folder
    python -m inference.engines llamacpp serve [MODEL] [--parallel N] [--port P]

The cache is ~/.cache/inference-lab/llama.cpp (INFERENCE_LAB_LLAMACPP_DIR moves it). MODEL is empty for the
bundled model, a Hugging Face model folder, or a .gguf file (serve only).
"""

from __future__ import annotations

import argparse
import sys


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
    args = parser.parse_args(argv)

    from inference.engines import llamacpp as lc

    if args.command == "build":
        print(lc.build(jobs=args.jobs))
    elif args.command == "convert":
        print(lc.convert(args.model or None, args.type))
    elif args.command == "serve":
        server = lc.serve(args.model or None, parallel=args.parallel, port=args.port, threads=args.threads)
        print(
            f"{server.url}  ({server.gguf.name}, {args.parallel} slot(s), ready in {server.started_s:.2f} s; "
            f"log {server.log_path}). Ctrl-C stops it.",
            flush=True,
        )
        try:
            server.process.wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
