-- wrk script for bench/purge.sh: one new Lead per request (single.lua's load), paced to
-- BENCH_RATE requests per second over all connections: each connection waits
-- connections / rate seconds before each request (wrk's `delay`), so the server sees a
-- steady rate below its maximum rather than as much as it can take.
dofile(os.getenv("BENCH_DIR") .. "/common.lua")

local rate = tonumber(os.getenv("BENCH_RATE") or "1000")
local connections = tonumber(os.getenv("BENCH_CONNECTIONS") or "16")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Service-Webhook-Secret"] = os.getenv("BENCH_SECRET")

function request()
  return wrk.format(nil, nil, nil, next_lead())
end

function delay()
  return connections * 1000 / rate
end

function done(summary, latency, requests)
  report(summary, latency, 1)
end
