-- wrk script: one new Lead per request (SPEC.md 2.1) to a channel source.
dofile(os.getenv("BENCH_DIR") .. "/common.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Service-Webhook-Secret"] = os.getenv("BENCH_SECRET")

function request()
  return wrk.format(nil, nil, nil, next_lead())
end

function done(summary, latency, requests)
  report(summary, latency, 1)
end
