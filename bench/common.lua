-- Shared by the ingest benchmark scripts: one unique lead as JSON text.
--
-- Every lead gets a unique externalId, email and phone, so that no request is an
-- idempotent replay or a duplicate: the benchmark measures the full path of a new lead.

local counter = 0
-- BENCH_AUTO=1: every lead asks for automated delivery (bench/autodelivery.sh).
local auto = os.getenv("BENCH_AUTO") == "1" and ',"triggerAutoDelivery":true' or ""
local prefix = ""
local phone_prefix = ""

function init_thread_prefix(id)
  math.randomseed(os.time() + id * 7919)
  local random = math.random(1000, 9999)
  prefix = string.format("t%d-%d-%d", id, random, math.random(1, 1000000000))
  phone_prefix = string.format("+49 %d%d", id, random)
end

function next_lead()
  counter = counter + 1
  return string.format(
    '{"externalId":"%s-%d","firstName":"Jane","lastName":"Doe",' ..
    '"email":"jane.%s.%d@example.com","phone":"%s %07d",' ..
    '"street":"Hauptstr.","houseNumber":"1","postalCode":"10115","city":"Berlin",' ..
    '"country":"DE","consentStatus":"granted","legalBasis":"consent",' ..
    '"capturedAt":"2026-01-01T10:00:00Z","captureMethod":"web_form",' ..
    '"productSlug":"solar","routingReady":true,"fieldValues":{"roof":"tile"},' ..
    '"utmSource":"bench"%s}',
    prefix, counter, prefix, counter, phone_prefix, counter % 10000000, auto)
end

local threads = {}
local next_id = 1

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  init_thread_prefix(id)
end

function response(status, headers, body)
  if status ~= 201 then
    bad = (bad or 0) + 1
    if bad <= 3 then
      io.stderr:write("unexpected status " .. status .. ": " .. body:sub(1, 300) .. "\n")
    end
  end
end

-- Prints one machine-readable line: requests/s, leads/s, p50 and p99 in ms, errors.
function report(summary, latency, leads_per_request)
  local seconds = summary.duration / 1e6
  local requests = summary.requests
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read +
                 summary.errors.write + summary.errors.timeout
  io.write(string.format(
    "RESULT requests_per_s=%.0f leads_per_s=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f errors=%d requests=%d\n",
    requests / seconds, requests * leads_per_request / seconds,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    errors, requests))
end
