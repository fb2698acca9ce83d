"""Driver of bench/litestream.sh: sends single-lead ingest requests at a fixed rate to a
running leadrelay and records every lead answered 201, until the server stops answering
(the script kills it). Writes the acknowledged lead ids, one a line, and prints a summary.

usage: litestream_failover.py BASE_URL RATE SECONDS ACKED_FILE
"""

import json
import sys
import threading
import time
import urllib.error
import urllib.request

PATH = "/api/webhooks/channels/web/sources/bench/leads"
SECRET = "bench-secret-0123456789abcdef"
THREADS = 16


def lead(n):
    return {
        "externalId": f"ls-{n}",
        "firstName": "Jane",
        "lastName": "Doe",
        "email": f"jane.ls.{n}@example.com",
        "phone": f"+49 30 {n:08d}",
        "postalCode": "10115",
        "country": "DE",
        "consentStatus": "granted",
        "productSlug": "solar",
        "fieldValues": {"roof": "tile"},
    }


def main():
    base, rate, seconds, acked_file = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    start = time.monotonic()
    lock = threading.Lock()
    acked = []  # (seconds since start, lead id)
    errors = []
    counter = [0]
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            with lock:
                n = counter[0]
                counter[0] += 1
            due = start + n / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if due - start > seconds:
                return
            body = json.dumps(lead(n)).encode()
            request = urllib.request.Request(
                base + PATH,
                data=body,
                headers={"Content-Type": "application/json", "X-Service-Webhook-Secret": SECRET},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    answer = json.load(response)
                    if response.status == 201:
                        with lock:
                            acked.append((time.monotonic() - start, answer["item"]["leadId"]))
            except (urllib.error.URLError, ConnectionError, OSError) as e:
                # The server is gone (killed by the script): the run is over.
                with lock:
                    errors.append(repr(e))
                stop.set()

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(acked_file, "w") as out:
        for _, lead_id in sorted(acked):
            out.write(lead_id + "\n")
    last = max((t for t, _ in acked), default=0.0)
    print(f"client: {len(acked)} leads acknowledged over {last:.1f} s "
          f"({len(acked) / last if last else 0:.0f}/s), stopped by: {errors[0] if errors else 'time'}")


if __name__ == "__main__":
    main()
