// trainops dashboard: live updates, actions, the confirm dialog and the log viewer.
// Our own code, no framework, no build step. It never builds HTML from strings: text goes in
// with textContent, and live updates swap in fragments the server rendered (and escaped).
(function () {
  "use strict";

  const body = document.body;
  const page = body.dataset.page || "";
  const watch = body.dataset.watch || "";
  document.documentElement.classList.add("js");

  // --- the session ------------------------------------------------------------------------
  // The token lives in an HttpOnly cookie this script cannot read (set by the login page or the
  // login link); every request carries it. When the server no longer accepts it (expired,
  // revoked, logged out elsewhere), go to the login page and come back here after.
  // Logging out clears the cookie while a live update may still be on its way; that update's
  // redirect must not race the logout's own answer (the login page, with no way back here).
  let loggingOut = false;
  document.addEventListener("submit", function (event) {
    if (event.target instanceof Element && event.target.matches("form.logout")) loggingOut = true;
  });
  // Back to this page from the browser's back-forward cache, after that logout: it is a live
  // page again, whose stale session must lead to the login page.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) loggingOut = false;
  });
  function toLogin() {
    if (loggingOut) return;
    location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search));
  }
  function sentToLogin(response) {
    return response.redirected && new URL(response.url).pathname === "/login";
  }

  // --- notices ---------------------------------------------------------------------------
  const notice = document.getElementById("notice");
  let noticeTimer = 0;
  function notify(text, isError, sticky) {
    if (!notice) return;
    delete notice.dataset.gone;
    notice.textContent = text;
    notice.classList.toggle("error", Boolean(isError));
    notice.hidden = false;
    clearTimeout(noticeTimer);
    if (!sticky) noticeTimer = setTimeout(function () { notice.hidden = true; }, isError ? 15000 : 6000);
  }

  // --- relative times --------------------------------------------------------------------
  // "3m ago" and ages ("5m") are rendered by the server for the moment it answered; between
  // stream events they would go stale, so every 30 s they are written again (as text) from
  // each <time data-rel datetime>, counted on the server's clock (its offset from this
  // browser's is taken once from body[data-now]). The spelling mirrors dashboard/format.py.
  const serverNow = Date.parse(body.dataset.now || "");
  const skew = isNaN(serverNow) ? 0 : serverNow - Date.now();
  function duration(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 86400) {
      const minutes = Math.floor(s / 60);
      const hours = Math.floor(minutes / 60);
      return minutes % 60 && hours < 10 ? hours + "h" + (minutes % 60) + "m" : hours + "h";
    }
    return Math.floor(s / 86400) + "d";
  }
  function renderTimes() {
    const now = Date.now() + skew;
    document.querySelectorAll("time[data-rel][datetime]").forEach(function (el) {
      const at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      const seconds = (now - at) / 1000;
      let text = duration(seconds);
      if (el.dataset.rel === "ago") text = seconds < 1 ? "just now" : text + " ago";
      if (el.textContent !== text) el.textContent = text;
    });
  }
  setInterval(renderTimes, 30000);

  // --- live updates ----------------------------------------------------------------------
  const status = document.getElementById("stream-status");
  const lostNotice = document.getElementById("stream-notice");
  let source = null;
  let wasLost = false;
  let retryDelay = 1000;

  function setStream(state) {
    if (!status) return;
    status.dataset.state = state;
    status.textContent = state === "open" ? "live" : "reconnecting…";
    if (lostNotice) lostNotice.hidden = state === "open";
  }

  function connect() {
    source = new EventSource("/api/v1/stream");
    source.onopen = function () {
      setStream("open");
      retryDelay = 1000;
      // Changes between the page's rendering (or the stream's loss) and this subscription
      // reach no event: fetch the fragments once now.
      scheduleRefresh(wasLost);
      wasLost = false;
    };
    source.onerror = function () {
      wasLost = true;
      setStream("reconnecting");
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (a non-stream answer): try again ourselves, backing off.
        setTimeout(connect, retryDelay);
        retryDelay = Math.min(retryDelay * 2, 15000);
      }
    };
    ["repository", "job", "resync"].forEach(function (kind) {
      source.addEventListener(kind, function (event) { onChange(kind, event.data); });
    });
  }

  function concerns(kind, data) {
    if (kind === "resync" || !watch) return true;
    const sep = watch.indexOf(":");
    const wantKind = watch.slice(0, sep);
    const wantKey = watch.slice(sep + 1);
    if (wantKind !== kind) return false;
    try {
      const meta = (JSON.parse(data).object || {}).metadata || {};
      return meta.namespace + "/" + meta.name === wantKey;
    } catch (e) {
      return true;
    }
  }

  function eventType(data) {
    try {
      return JSON.parse(data).type || "";
    } catch (e) {
      return "";
    }
  }

  function onChange(kind, data) {
    if (!concerns(kind, data)) return;
    if (page === "job" && kind === "job") {
      const type = eventType(data);
      if (type === "DELETED") {
        markGone();
        return;
      }
      if (type === "ADDED") unmarkGone(); // a repository created it again
    }
    scheduleRefresh(kind === "resync");
  }

  // Refreshes are coalesced: one in flight, at most one more queued behind it.
  let refreshTimer = 0;
  let refreshing = false;
  let refreshAgain = false;
  let catchUp = false; // after a lost stream or a resync: events may have been missed
  function scheduleRefresh(missed) {
    if (missed) catchUp = true;
    if (refreshing) {
      refreshAgain = true;
      return;
    }
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, 60);
  }

  async function refresh() {
    refreshing = true;
    // A deleted job's fragment is not fetched again on its stream events (it would only say
    // "gone"); after missed events it is, once, in case the job was created again.
    const recheck = catchUp;
    catchUp = false;
    try {
      const parts = Array.prototype.slice.call(document.querySelectorAll("[data-fragment]"));
      await Promise.all(
        parts
          .filter(function (part) { return !(jobGone && part.dataset.fragment === "job" && !recheck); })
          .map(refreshFragment)
      );
    } finally {
      refreshing = false;
      if (refreshAgain) {
        refreshAgain = false;
        scheduleRefresh();
      }
    }
  }

  function fragmentUrl(name) {
    const params = new URLSearchParams(location.search);
    params.set("fragment", name);
    return location.pathname + "?" + params.toString();
  }

  async function refreshFragment(current) {
    const name = current.dataset.fragment;
    let response;
    try {
      response = await fetch(fragmentUrl(name), { credentials: "same-origin", cache: "no-store" });
    } catch (e) {
      return; // the stream's state already tells the user
    }
    if (response.status === 404 && page === "job") {
      markGone(); // the server answers a "gone" fragment instead; kept for safety
      return;
    }
    if (sentToLogin(response)) {
      toLogin();
      return;
    }
    if (!response.ok) return;
    const html = await response.text();
    const parsed = new DOMParser().parseFromString(html, "text/html");
    const next = parsed.querySelector('[data-fragment="' + name + '"]');
    if (!next || !current.isConnected) return;
    if (next.dataset.gone) {
      markGone(); // keep what the page last showed, under the notice
      return;
    }
    if (name === "job") unmarkGone();
    const focusKey = focusedKey(current);
    const fresh = document.importNode(next, true);
    current.replaceWith(fresh);
    if (focusKey) restoreFocus(fresh, focusKey);
    if (page === "job") syncLogReplicas(fresh);
  }

  // Keep keyboard focus on "the same" control across a swap.
  function focusedKey(container) {
    const el = document.activeElement;
    if (!el || el === document.body || !container.contains(el)) return null;
    if (el.id) return "#" + CSS.escape(el.id);
    const attrs = ["data-action", "data-url", "data-revision", "href"];
    const parts = attrs
      .filter(function (a) { return el.hasAttribute(a); })
      .map(function (a) { return "[" + a + '="' + CSS.escape(el.getAttribute(a)) + '"]'; });
    return parts.length ? el.tagName.toLowerCase() + parts.join("") : null;
  }
  function restoreFocus(container, selector) {
    const el = container.querySelector(selector);
    if (el) el.focus();
  }

  // --- a deleted job (job page) ---------------------------------------------------------
  // After a confirmed Delete, a stream event saying the job was deleted, or a fragment saying
  // it is gone: a notice with a link to the overview, the job's actions disabled, and no more
  // fetches of its fragment (see refresh).
  let jobGone = false;
  function markGone() {
    if (jobGone) return;
    jobGone = true;
    document.querySelectorAll('[data-fragment="job"] button[data-action]').forEach(function (b) {
      b.disabled = true;
    });
    if (!notice) return;
    const job = document.querySelector('[data-fragment="job"] button[data-action="delete"]');
    const name = job ? job.dataset.name + " " : "This job ";
    notify(name + "was deleted; ", false, true);
    notice.dataset.gone = "true";
    const link = document.createElement("a");
    link.id = "notice-overview";
    link.href = "/";
    link.textContent = "back to the overview";
    notice.appendChild(link);
  }
  function unmarkGone() {
    if (!jobGone) return;
    jobGone = false;
    if (notice && notice.dataset.gone) notify("It exists again (created again, e.g. by its repository's sync).", false);
  }

  // --- filters (front page) --------------------------------------------------------------
  const filters = document.getElementById("filters");
  if (filters) {
    filters.addEventListener("change", function () {
      const params = new URLSearchParams();
      ["namespace", "repository", "phase"].forEach(function (key) {
        const select = filters.elements.namedItem(key);
        if (select && select.value) params.set(key, select.value);
      });
      const query = params.toString();
      history.replaceState(null, "", location.pathname + (query ? "?" + query : ""));
      scheduleRefresh();
    });
  }

  // --- confirm dialog --------------------------------------------------------------------
  const dialog = document.getElementById("confirm-dialog");
  function confirmAction(title, message, okLabel, danger) {
    return new Promise(function (resolve) {
      if (!dialog || typeof dialog.showModal !== "function") {
        resolve(false);
        return;
      }
      const ok = document.getElementById("confirm-ok");
      const cancel = document.getElementById("confirm-cancel");
      const opener = document.activeElement;
      document.getElementById("confirm-title").textContent = title;
      document.getElementById("confirm-message").textContent = message;
      ok.textContent = okLabel;
      ok.classList.toggle("danger", Boolean(danger));
      ok.classList.toggle("primary", !danger);
      let answer = false;
      function finish(value) {
        answer = value;
        dialog.close();
      }
      function onOk() { finish(true); }
      function onCancel() { finish(false); }
      function onClose() {
        ok.removeEventListener("click", onOk);
        cancel.removeEventListener("click", onCancel);
        dialog.removeEventListener("close", onClose);
        if (opener && opener.isConnected && typeof opener.focus === "function") opener.focus();
        resolve(answer);
      }
      ok.addEventListener("click", onOk);
      cancel.addEventListener("click", onCancel);
      dialog.addEventListener("close", onClose); // Escape closes it too: a cancel
      dialog.showModal();
      (danger ? cancel : ok).focus();
    });
  }

  // --- actions ---------------------------------------------------------------------------
  const ACTIONS = {
    sync: {
      method: "POST", path: "/sync",
      ask: function (b) {
        return ["Sync " + b.dataset.name + "?", "Apply what Git has at the target revision to the cluster now.", "Sync"];
      },
      done: function (b) { return "sync of " + b.dataset.name + " queued"; },
    },
    "sync-revision": {
      method: "POST", path: "/sync",
      body: function (b) { return { revision: b.dataset.revision }; },
      ask: function (b) {
        return [
          "Sync " + b.dataset.name + " to " + b.dataset.revision.slice(0, 7) + "?",
          "Apply the manifests of revision " + b.dataset.revision + " once. With automated sync, only the revision the target resolves to is accepted.",
          "Sync this revision",
        ];
      },
      done: function (b) { return "sync of " + b.dataset.name + " at " + b.dataset.revision.slice(0, 7) + " queued"; },
    },
    refresh: {
      method: "POST", path: "/refresh",
      done: function (b) { return "refresh of " + b.dataset.name + " queued"; },
    },
    pause: {
      method: "POST", path: "/pause",
      ask: function (b) {
        let text = "Its replica pods are deleted (services stay) until you resume it.";
        if (b.dataset.repository) {
          text += " " + b.dataset.repository + " deploys this job from Git: the pause holds. spec.runMode.pause.enabled becomes yours (annotation gitops.trainops.dev/held-fields): self-heal and later commits leave it alone until that annotation is removed.";
        }
        return ["Pause " + b.dataset.name + "?", text, "Pause"];
      },
      done: function (b) { return "pause requested for " + b.dataset.name; },
    },
    resume: {
      method: "POST", path: "/resume",
      ask: function (b) {
        let text = "Its replicas are created again (with resumeSpecs when the job has them).";
        if (b.dataset.repository) {
          text += " " + b.dataset.repository + " deploys this job from Git: the resume holds too; spec.runMode.pause.enabled stays yours (annotation gitops.trainops.dev/held-fields) until that annotation is removed.";
        }
        return ["Resume " + b.dataset.name + "?", text, "Resume"];
      },
      done: function (b) { return "resume requested for " + b.dataset.name; },
    },
    delete: {
      method: "DELETE", path: "", danger: true,
      ask: function (b) {
        return [
          "Delete " + b.dataset.name + "?",
          b.dataset.repository
            ? b.dataset.repository + " deploys this job from Git: while that repository exists, deleting it here is refused (its next sync would create it again). Remove it from Git instead, or pause it (a pause holds)."
            : "The job, its pods, services and logs are deleted.",
          "Delete",
        ];
      },
      done: function (b) { return "delete requested for " + b.dataset.name; },
    },
  };

  document.addEventListener("click", async function (event) {
    const button = event.target.closest("button[data-action]");
    if (!button || button.disabled) return;
    const action = ACTIONS[button.dataset.action];
    if (!action) return;
    event.preventDefault();
    if (action.ask) {
      const q = action.ask(button);
      if (!(await confirmAction(q[0], q[1], q[2], action.danger))) return;
    }
    const headers = { Accept: "application/json" };
    const init = { method: action.method, headers: headers, credentials: "same-origin" };
    if (action.method === "POST") {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(action.body ? action.body(button) : {});
    }
    button.classList.add("busy");
    button.setAttribute("aria-busy", "true");
    try {
      const response = await fetch(button.dataset.url + action.path, init);
      let answer = {};
      try {
        answer = await response.json();
      } catch (e) {
        /* not JSON */
      }
      if (response.ok && button.dataset.action === "delete" && page === "job") {
        markGone();
      } else if (response.ok) {
        notify(action.done(button), false);
        scheduleRefresh();
      } else if (response.status === 401) {
        toLogin();
      } else {
        notify("Failed: " + (answer.error || response.status + " " + response.statusText), true);
      }
    } catch (e) {
      notify("Failed: the server did not answer (" + e.message + ")", true);
    } finally {
      button.classList.remove("busy");
      button.removeAttribute("aria-busy");
    }
  });

  // --- logs (job page) -------------------------------------------------------------------
  const logSelect = document.getElementById("log-replica");
  const logOut = document.getElementById("log-output");
  const followButton = document.getElementById("log-follow");
  const logControls = document.querySelector(".log-controls");
  const hideInfo = document.getElementById("log-hide-info");
  const hiddenNote = document.getElementById("log-hidden");
  const LOG_LIMIT = 1000000; // characters kept in the page while following
  const HIDE_INFO_KEY = "trainops-log-hide-info";
  // INFO noise: glog/absl lines (`I0000 00:00:1733…  coordination_service_agent.cc:…]`, TF's C++
  // and absl's Python logging), Python logging's `INFO:name:…`, `[INFO] …`, and `<time> INFO …`.
  // Warnings, errors and plain output (Keras' progress, print()) always stay.
  const INFO_LINE = /^(?:I\d{4} \d\d:\d\d:\d\d|[[(]?INFO[\])]?[\s:]|\d[\d\-/:.,TZ+]*(?: [\d:.,Z+\-]+)?\s+[[(]?INFO[\])]?[\s:])/;
  let logAbort = null;
  let logFailed = false; // e.g. the container was still starting: try again on the next change
  let logText = ""; // what the log answered so far (bounded by LOG_LIMIT), shown filtered
  let hiddenLines = 0;

  function following() {
    return followButton && followButton.getAttribute("aria-pressed") === "true";
  }

  function hiding() {
    return Boolean(hideInfo && hideInfo.checked);
  }

  // Whole lines of `text` without the INFO ones (and a last line without its newline, if any).
  function filterLines(text) {
    const lines = text.split("\n");
    const last = lines.pop();
    const kept = [];
    let hidden = 0;
    lines.forEach(function (line) {
      if (INFO_LINE.test(line)) hidden += 1;
      else kept.push(line + "\n");
    });
    if (last) {
      if (INFO_LINE.test(last)) hidden += 1;
      else kept.push(last);
    }
    return { text: kept.join(""), hidden: hidden };
  }

  function noteHidden() {
    if (!hiddenNote) return;
    hiddenNote.textContent = hiding()
      ? hiddenLines + " INFO line" + (hiddenLines === 1 ? "" : "s") + " hidden"
      : "";
  }

  // Show the whole of logText again (after a toggle, a new log or a trim). While hiding, a line
  // still being written waits for its newline: only then can it be told INFO or not.
  function renderLog() {
    if (!hiding()) {
      logOut.textContent = logText;
      hiddenLines = 0;
    } else {
      const shown = filterLines(logText.slice(0, logText.lastIndexOf("\n") + 1));
      logOut.textContent = shown.text;
      hiddenLines = shown.hidden;
    }
    noteHidden();
  }

  function appendLog(chunk) {
    const before = logText;
    logText += chunk;
    if (logText.length > LOG_LIMIT) {
      const kept = logText.slice(-LOG_LIMIT / 2);
      logText = kept.slice(kept.indexOf("\n") + 1);
      renderLog();
      return;
    }
    if (!hiding()) {
      logOut.appendChild(document.createTextNode(chunk));
      return;
    }
    const start = before.lastIndexOf("\n") + 1; // the line the chunk continues
    const end = logText.lastIndexOf("\n") + 1;
    if (end <= start) return;
    const shown = filterLines(logText.slice(start, end));
    hiddenLines += shown.hidden;
    if (shown.text) logOut.appendChild(document.createTextNode(shown.text));
    noteHidden();
  }

  function logMessage(text) {
    logText = "";
    hiddenLines = 0;
    logOut.textContent = text;
    noteHidden();
  }

  function logUrl(follow) {
    const params = new URLSearchParams({ pod: logSelect.value, tailLines: "500" });
    if (follow) params.set("follow", "true");
    return logControls.dataset.api + "/logs?" + params.toString();
  }

  function nearBottom() {
    return logOut.scrollHeight - logOut.scrollTop - logOut.clientHeight < 40;
  }

  async function loadLog() {
    if (logAbort) logAbort.abort();
    logAbort = new AbortController();
    const signal = logAbort.signal;
    if (!logSelect.value) return;
    const follow = following();
    logFailed = false;
    logMessage("Loading the log of " + logSelect.value + "…");
    let response;
    try {
      response = await fetch(logUrl(follow), { signal: signal, credentials: "same-origin" });
    } catch (e) {
      if (!signal.aborted) logMessage("Could not read the log: " + e.message);
      logFailed = true;
      return;
    }
    if (response.status === 401) {
      toLogin();
      return;
    }
    if (!response.ok) {
      let message = response.status + " " + response.statusText;
      try {
        message = (await response.json()).error || message;
      } catch (e) {
        /* not JSON */
      }
      logMessage("Could not read the log: " + message);
      logFailed = true;
      return;
    }
    if (!follow || !response.body) {
      const text = await response.text();
      if (!text) {
        logMessage("(the log is empty so far)");
      } else {
        logText = text.length > LOG_LIMIT ? text.slice(-LOG_LIMIT) : text;
        renderLog();
      }
      logOut.scrollTop = logOut.scrollHeight;
      return;
    }
    logMessage("");
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        const stick = nearBottom();
        appendLog(decoder.decode(chunk.value, { stream: true }));
        if (stick) logOut.scrollTop = logOut.scrollHeight;
      }
      appendLog("\n[the log ended]\n");
    } catch (e) {
      if (!signal.aborted) appendLog("\n[log stream lost: " + e.message + "]\n");
    }
    if (!signal.aborted) setFollow(false);
  }

  function setFollow(on) {
    followButton.setAttribute("aria-pressed", on ? "true" : "false");
    followButton.textContent = on ? "Following (stop)" : "Follow";
  }

  // New replica pods show up in the job fragment's hidden list: offer them in the select.
  function syncLogReplicas(fragment) {
    if (!logSelect) return;
    const had = logSelect.options.length;
    fragment.querySelectorAll("#job-pods li[data-pod]").forEach(function (li) {
      const pod = li.dataset.pod;
      const exists = Array.prototype.some.call(logSelect.options, function (o) { return o.value === pod; });
      if (!exists) logSelect.add(new Option(pod, pod));
    });
    if ((had === 0 && logSelect.options.length > 0) || (logFailed && !following())) loadLog();
  }

  if (logSelect && logOut && followButton && logControls) {
    if (hideInfo) {
      // Off by default (a log viewer that hides lines unasked misleads); remembered per browser.
      try {
        hideInfo.checked = localStorage.getItem(HIDE_INFO_KEY) === "1";
      } catch (e) {
        /* storage disabled: the default */
      }
      hideInfo.addEventListener("change", function () {
        try {
          localStorage.setItem(HIDE_INFO_KEY, hideInfo.checked ? "1" : "0");
        } catch (e) {
          /* storage disabled: for this page only */
        }
        if (logText) renderLog();
        else noteHidden();
      });
    }
    logSelect.addEventListener("change", loadLog);
    followButton.addEventListener("click", function () {
      setFollow(!following());
      loadLog();
    });
    loadLog();
  }

  if (page !== "error" || document.getElementById("stream-status")) connect();
})();
