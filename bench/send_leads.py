#!/usr/bin/env python3
"""Sends exactly REQUESTS requests of BATCH new leads each (1: a single Lead) to a leadrelay
ingest URL over CONNECTIONS keep-alive connections, and exits non-zero if any was not
answered 201/207. Unlike wrk (timed), the amount of work is fixed: bench/memory.sh reads the
server's memory after a known number of leads, and an instruction count per lead (callgrind)
needs a known number of leads.

    bench/send_leads.py URL REQUESTS CONNECTIONS BATCH [TAG]

The leads are those of bench/plain.lua; TAG (default "run") keeps two calls' externalIds
apart. ADDITIONAL (environment), a JSON object, is added to every lead: additional
properties such as `{"utmSource": "bench"}`, which partners send and bench/common.lua's
leads carry."""
import http.client
import json
import os
import sys
import threading
import urllib.parse


def main():
    url, requests, connections, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    tag = sys.argv[5] if len(sys.argv) > 5 else "run"
    additional = json.loads(os.environ.get("ADDITIONAL", "{}"))
    target = urllib.parse.urlsplit(url)
    lock = threading.Lock()
    state = {"next": 0, "failed": 0}

    def lead(i):
        key = f"{tag}-{i}"
        return {"externalId": key, "firstName": "Ada", "lastName": "Lovelace",
                "email": key + "@example.com", "phone": "+49151%08d" % (i % 10**8),
                "country": "DE", "postalCode": "10115", **additional}

    def worker():
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
        while True:
            with lock:
                n = state["next"]
                if n >= requests:
                    return
                state["next"] += 1
            if batch == 1:
                body = json.dumps(lead(n))
            else:
                body = json.dumps({"leads": [lead(n * batch + j) for j in range(batch)]})
            conn.request("POST", target.path, body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            if response.status not in (201, 207):
                with lock:
                    state["failed"] += 1

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"sent {requests} requests of {batch} leads, {state['failed']} not answered 201/207")
    sys.exit(1 if state["failed"] else 0)


main()
