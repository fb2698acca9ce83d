-- wrk script: a batch of 100 new Leads per request (SPEC.md 2.4 (c)) to a channel source.
dofile(os.getenv("BENCH_DIR") .. "/common.lua")

local size = tonumber(os.getenv("BENCH_BATCH") or "100")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Service-Webhook-Secret"] = os.getenv("BENCH_SECRET")

function request()
  local leads = {}
  for i = 1, size do
    leads[i] = next_lead()
  end
  return wrk.format(nil, nil, nil, '{"leads":[' .. table.concat(leads, ",") .. ']}')
end

function done(summary, latency, requests)
  report(summary, latency, size)
end
