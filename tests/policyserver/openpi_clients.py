"""Runs in the second environment (numpy<2, the real ``openpi-client`` from PyPI), never in
evaltui's: ``python openpi_clients.py PORT REQUESTS_FILE CLIENTS OUT_FILE``.

Reads a list of requests (msgpack, openpi's own codec), starts CLIENTS threads with one
``WebsocketClientPolicy`` each, which all start together and send requests i, i+CLIENTS,
... in turn; writes ``[[request index, reply], ...]`` per client as JSON, plus each
client's server metadata.
"""

import json
import sys
import threading

import numpy as np
from openpi_client import msgpack_numpy
from openpi_client.websocket_client_policy import WebsocketClientPolicy


def plain(value):
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


def main():
    port, requests_file, clients, out_file = (int(sys.argv[1]), sys.argv[2],
                                              int(sys.argv[3]), sys.argv[4])
    with open(requests_file, "rb") as fh:
        requests = msgpack_numpy.unpackb(fh.read())
    results = [None] * clients
    metadata = [None] * clients
    start = threading.Barrier(clients)

    def client(i):
        policy = WebsocketClientPolicy(host="127.0.0.1", port=port)
        metadata[i] = policy.get_server_metadata()
        start.wait()
        mine = []
        for index in range(i, len(requests), clients):
            reply = policy.infer(requests[index])
            reply.pop("server_timing", None)
            mine.append([index, plain(reply)])
        results[i] = mine

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out_file, "w") as fh:
        json.dump({"results": results, "metadata": plain(metadata)}, fh)


if __name__ == "__main__":
    main()
