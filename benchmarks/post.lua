-- wrk script: POST the AdmissionReview in the file named by $BODY_FILE, keep-alive.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
