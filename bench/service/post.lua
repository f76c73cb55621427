-- wrk: POST a read proposal with a fresh Idempotency-Key on every request.
-- `run_id` (set by bench_service.py, new for every wrk run) keeps keys of
-- the warm-up and the measured run apart.
local counter = 0
local thread_id = 0

function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
end

request = function()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = "k-" .. run_id .. "-" .. tid .. "-" .. counter
  return wrk.format("POST", wrk.path, wrk.headers, wrk.body)
end
