"""`replaybench leaderboard serve`: the built leaderboard folder on http://127.0.0.1:PORT until Ctrl-C."""

from __future__ import annotations

import signal
from pathlib import Path

from benchmark.leaderboard import LeaderboardError


def serve(directory: Path, port: int = 8000) -> int:
    """Serve the folder on 127.0.0.1 until Ctrl-C."""
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    directory = Path(directory)
    if not (directory / "index.html").is_file():
        raise LeaderboardError(f"{directory / 'index.html'} is missing: run `replaybench leaderboard build` first "
                               "(or pass --dir FOLDER)")
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), partial(SimpleHTTPRequestHandler, directory=str(directory)))
    except (OSError, OverflowError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "ports are 0-65535"
        raise LeaderboardError(f"cannot listen on 127.0.0.1:{port} ({reason}): pass another --port, or "
                               "--port 0 for a free one") from None

    def stop(signum, frame):
        raise KeyboardInterrupt

    # A process started in the background inherits SIGINT ignored, so Python installs no Ctrl-C handler:
    # install ours, and let SIGTERM (a service manager's stop) end the server the same clean way.
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with server:
            print(f"serving {directory} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                print("stopped", flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
