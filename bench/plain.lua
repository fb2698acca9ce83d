-- wrk script for bench/reference.sh: plain ingest (no product, no secret, no auto-delivery),
-- BENCH_BATCH new leads per request (1: a single Lead, else {"leads": [...]}), each with a
-- unique externalId, email and phone. The lead is the one the SQLite ceiling writes
-- (bench/ceiling.rs), so that the two figures can be divided. The emails follow a counter
-- unless BENCH_KEYS=random, which draws them at random as real traffic's are (the email
-- index then takes each lead on a leaf of its own, as it does in production).
local size = tonumber(os.getenv("BENCH_BATCH") or "1")
local random_keys = os.getenv("BENCH_KEYS") == "random"
local counter = 0
local tag = ""

function init(args)
  tag = tostring({}):sub(-8) .. tostring(math.random(1, 1e9))
  math.randomseed(os.time() + tonumber(tostring({}):sub(-6), 16))
end

local function lead()
  counter = counter + 1
  local id = tag .. "-" .. counter
  local mailbox = id
  if random_keys then
    mailbox = string.format("%08x%08x", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
  end
  return '{"externalId":"' .. id .. '","firstName":"Ada","lastName":"Lovelace","email":"' .. mailbox ..
    '@example.com","phone":"+49151' .. string.format("%08d", counter) .. tag:sub(-3) ..
    '","country":"DE","postalCode":"10115"}'
end

request = function()
  local body
  if size == 1 then
    body = lead()
  else
    local items = {}
    for i = 1, size do items[i] = lead() end
    body = '{"leads":[' .. table.concat(items, ",") .. ']}'
  end
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
