-- wrk script for bench/storage.sh: batches of the ingest benchmark's lead (common.lua),
-- each thread stopping after its share of BENCH_LEADS leads.
dofile(os.getenv("BENCH_DIR") .. "/common.lua")

local size = tonumber(os.getenv("BENCH_BATCH") or "100")
local share = tonumber(os.getenv("BENCH_SHARE") or "1000")
local answered = 0
-- DELIVERED=1: each lead asks for automated delivery (bench/storage.sh adds the buyers).
local delivered = os.getenv("DELIVERED") == "1"

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Service-Webhook-Secret"] = os.getenv("BENCH_SECRET")

function request()
  local leads = {}
  for i = 1, size do
    leads[i] = next_lead()
    if delivered then
      leads[i] = leads[i]:gsub('"routingReady":true', '"routingReady":true,"triggerAutoDelivery":true', 1)
    end
  end
  return wrk.format(nil, nil, nil, '{"leads":[' .. table.concat(leads, ",") .. ']}')
end

function response(status, headers, body)
  if status ~= 201 then
    io.stderr:write("unexpected status " .. status .. ": " .. body:sub(1, 300) .. "\n")
  end
  answered = answered + size
  if answered >= share then
    -- wrk keeps its main thread asleep for the whole duration: tell the script instead.
    io.open(os.getenv("BENCH_DONE"), "w"):close()
    wrk.thread:stop()
  end
end
