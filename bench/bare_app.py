"""The physical limit: a bare Falcon app answering a fixed JSON body, on waitress with the service's threads."""

import sys

import falcon
import waitress

BODY = {"ok": True, "service": "bare", "note": "a fixed answer, no work"}


def answer(req: falcon.Request, resp: falcon.Response, **params) -> None:
    if req.method != "GET":
        req.bounded_stream.read()  # read the body, as any real endpoint must
    resp.media = BODY


app = falcon.App()
app.add_sink(answer, "/")

if __name__ == "__main__":
    port, threads = int(sys.argv[1]), int(sys.argv[2])
    waitress.serve(app, host="127.0.0.1", port=port, threads=threads, ident="bare", _quiet=True)
