"""What the router adds to a streamed request: TTFT and output tokens/s of the same requests sent
to an engine directly and through the router, alternated in one run (stdlib only).

Usage: router_overhead.py MODEL DIRECT_URL ROUTER_URL TTFT_REQUESTS RUNS CONCURRENCY REQUESTS INPUT_LEN OUTPUT_LEN

- TTFT: TTFT_REQUESTS requests one at a time to each endpoint, alternating direct and router
  request by request (so drift in the machine's load falls on both alike), each with INPUT_LEN
  prompt tokens and 16 output tokens; the time from sending the request to the first event that
  carries text. p50 of each, and the difference (and the median of each pair's difference).
- Output tokens/s: RUNS runs per endpoint, alternating which goes first, each REQUESTS requests
  of INPUT_LEN → OUTPUT_LEN tokens with CONCURRENCY in flight; tokens (the engine's usage) over
  the run's wall time. Median of each, and the ratio.

Every request is greedy with a fixed length (ignore_eos) and without llama-server's prompt cache
(cache_prompt false), so each endpoint gets the same work. Prints a Markdown table; exits 1 when
the issue's goals are missed (TTFT p50 more than 1 ms higher, throughput under 0.98 of direct).
"""

import http.client
import json
import statistics
import sys
import threading
import time
from urllib.parse import urlsplit


def stream(url, model, prompt, max_tokens):
    """One streamed completion: (seconds to the first text, completion tokens)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "seed": 0,
                       "ignore_eos": True, "cache_prompt": False, "stream": True})
    start = time.perf_counter()
    connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        sys.exit(f"{url}: {response.status} {response.read()[:300]!r}")
    first, tokens = None, 0
    for line in response:
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        if first is None and event["choices"] and event["choices"][0].get("text"):
            first = time.perf_counter() - start
        tokens = event.get("usage", {}).get("completion_tokens", tokens)
    connection.close()
    if first is None or tokens != max_tokens:
        sys.exit(f"{url}: {tokens} tokens of {max_tokens}, first text {first}")
    return first, tokens


def throughput(url, model, prompt, concurrency, requests, output_len):
    """Output tokens/s of REQUESTS requests, CONCURRENCY at a time."""
    left = [requests]
    lock = threading.Lock()
    total = [0]

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            _, tokens = stream(url, model, prompt, output_len)
            with lock:
                total[0] += tokens

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return total[0] / (time.perf_counter() - start)


def main():
    model, direct, router = sys.argv[1:4]
    ttft_requests, runs, concurrency, requests, input_len, output_len = map(int, sys.argv[4:10])
    # " hello" is one token of the llama SPM vocabulary: INPUT_LEN of them, after BOS.
    prompt = "hello " * input_len
    for url in (direct, router):
        stream(url, model, prompt, 4)  # warm-up, untimed

    ttft = {direct: [], router: []}
    for _ in range(ttft_requests):
        for url in (direct, router):
            ttft[url].append(stream(url, model, prompt, 16)[0] * 1000)

    rates = {direct: [], router: []}
    for run in range(runs):
        for url in ((direct, router) if run % 2 == 0 else (router, direct)):
            rates[url].append(throughput(url, model, prompt, concurrency, requests, output_len))
        print(f"run {run + 1}: direct {rates[direct][-1]:.1f} tok/s, router {rates[router][-1]:.1f} tok/s",
              file=sys.stderr)

    p50_direct, p50_router = statistics.median(ttft[direct]), statistics.median(ttft[router])
    rate_direct, rate_router = statistics.median(rates[direct]), statistics.median(rates[router])
    ttft_extra, ratio = p50_router - p50_direct, rate_router / rate_direct
    # Each router request beside the direct one just before it: what the router adds, with less
    # of the machine's drift than the two p50s.
    paired = statistics.median(r - d for d, r in zip(ttft[direct], ttft[router]))
    print(f"| llama-server (tiny llama, CPU), {input_len} prompt tokens | direct | router | router − direct |")
    print("|---|---|---|---|")
    print(f"| TTFT p50 (ms), {ttft_requests} requests each, one at a time, 16 output tokens "
          f"| {p50_direct:.2f} | {p50_router:.2f} | {ttft_extra:+.2f} ms (paired median {paired:+.2f} ms) |")
    print(f"| output tokens/s, median of {runs} runs of {requests} requests, concurrency {concurrency}, "
          f"{output_len} output tokens | {rate_direct:.1f} | {rate_router:.1f} | {ratio:.3f}× |")
    missed = [goal for goal, met in (("TTFT p50 at most 1 ms higher", ttft_extra <= 1.0),
                                     ("output tokens/s at least 0.98 of direct", ratio >= 0.98)) if not met]
    if missed:
        sys.exit("router-overhead: goal missed: " + "; ".join(missed))


if __name__ == "__main__":
    main()
