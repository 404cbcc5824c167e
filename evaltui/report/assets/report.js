/* evaltui report: the episode table of a run page, the frame viewer and firing log of an
 * episode page. Plain ES2017, no modules and no network: the pages open from file://,
 * where Chromium forbids fetch() and module scripts, so each page's data arrives as a
 * <script src> that sets window.EVALTUI_EPISODES or window.EVALTUI_EPISODE. */
(function () {
  "use strict";

  var TABLE_PAGE = 100;
  var LOG_PAGE = 50;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function shown(value, digits) {
    if (value === null || value === undefined) { return "-"; }
    if (typeof value === "number") {
      return Number.isInteger(value) && digits === undefined ? String(value)
        : value.toFixed(digits === undefined ? 4 : digits);
    }
    return String(value);
  }

  function epName(index) {
    var s = String(index);
    while (s.length < 4) { s = "0" + s; }
    return "ep" + s;
  }

  function pager(nav, page, pages, onPage) {
    nav.textContent = "";
    var prev = el("button", { type: "button", "class": "prev" }, "previous");
    var next = el("button", { type: "button", "class": "next" }, "next");
    prev.disabled = page <= 0;
    next.disabled = page >= pages - 1;
    prev.addEventListener("click", function () { onPage(page - 1); });
    next.addEventListener("click", function () { onPage(page + 1); });
    nav.appendChild(prev);
    nav.appendChild(el("span", { "class": "page-of" },
      "page " + (pages ? page + 1 : 0) + " of " + pages));
    nav.appendChild(next);
  }

  /* ---- the run page's episode table ------------------------------------------------ */

  var LABELS = {
    episode_index: "#", episode_id: "episode id", status: "status",
    instruction: "instruction", step_count: "step count", elapsed_sec: "elapsed s",
    error: "error"
  };

  function episodeTable(data) {
    var table = document.getElementById("episodes");
    var cols = data.columns;
    var col = {};
    cols.forEach(function (name, i) { col[name] = i; });
    var order = ["episode_index", "episode_id", "status", "instruction", "step_count",
      "elapsed_sec"].concat(data.metrics, ["error"]);
    var pages = {};
    data.pages.forEach(function (i) { pages[i] = true; });
    var st = { key: "episode_index", dir: 1, status: "", query: "", page: 0 };
    var view = data.rows;

    var select = document.getElementById("status-filter");
    data.statuses.forEach(function (s) { select.appendChild(el("option", { value: s }, s)); });
    select.addEventListener("change", function () { st.status = select.value; st.page = 0; update(); });
    var search = document.getElementById("search");
    search.addEventListener("input", function () {
      st.query = search.value.trim().toLowerCase(); st.page = 0; update();
    });

    var headRow = el("tr");
    order.forEach(function (name) {
      var th = el("th", { "data-key": name, scope: "col", tabindex: "0" },
        LABELS[name] || name);
      th.addEventListener("click", function () { sortBy(name); });
      th.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sortBy(name); }
      });
      headRow.appendChild(th);
    });
    table.tHead.appendChild(headRow);

    function sortBy(name) {
      st.dir = st.key === name ? -st.dir : 1;
      st.key = name;
      st.page = 0;
      update();
    }

    function compare(a, b) {
      var i = col[st.key];
      var x = a[i], y = b[i];
      if (x === null || x === undefined) { return (y === null || y === undefined) ? 0 : 1; }
      if (y === null || y === undefined) { return -1; }
      var c = (typeof x === "number" && typeof y === "number") ? x - y
        : String(x).localeCompare(String(y));
      return c === 0 ? a[0] - b[0] : c * st.dir;
    }

    function matches(row) {
      if (st.status && row[col.status] !== st.status) { return false; }
      if (!st.query) { return true; }
      if (/^\d+$/.test(st.query) && row[col.episode_index] === Number(st.query)) { return true; }
      var id = row[col.episode_id], text = row[col.instruction];
      return (id !== null && String(id).toLowerCase().indexOf(st.query) >= 0) ||
        (text !== null && String(text).toLowerCase().indexOf(st.query) >= 0);
    }

    function update() {
      view = data.rows.filter(matches);
      view.sort(compare);
      Array.prototype.forEach.call(headRow.children, function (th) {
        var key = th.getAttribute("data-key");
        th.setAttribute("aria-sort", key === st.key
          ? (st.dir > 0 ? "ascending" : "descending") : "none");
      });
      render();
    }

    function render() {
      var count = Math.ceil(view.length / TABLE_PAGE);
      st.page = Math.max(0, Math.min(st.page, count - 1));
      var start = st.page * TABLE_PAGE;
      var slice = view.slice(start, start + TABLE_PAGE);
      var body = document.createElement("tbody");
      slice.forEach(function (row) {
        var index = row[col.episode_index];
        var tr = el("tr", { "data-index": index, "data-status": row[col.status] });
        order.forEach(function (name) {
          var value = row[col[name]];
          var td = el("td", { "data-col": name });
          if (name === "episode_index" && pages[index]) {
            td.appendChild(el("a", { href: "episodes/" + epName(index) + ".html" }, index));
          } else if (name === "status") {
            td.appendChild(el("span", { "class": "state state-" + value }, value));
          } else if (name === "elapsed_sec") {
            td.textContent = shown(value, 3);
          } else if (data.metrics.indexOf(name) >= 0) {
            td.textContent = shown(value, 3);
            td.className = "num";
          } else {
            td.textContent = shown(value);
          }
          if (name === "error" && value) { td.title = value; td.className = "error"; }
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      table.replaceChild(body, table.tBodies[0]);
      document.getElementById("shown-count").textContent = view.length
        ? "showing " + (start + 1) + "-" + (start + slice.length) + " of " + view.length +
          (view.length < data.rows.length ? " (" + data.rows.length + " episodes)" : " episodes")
        : "no episode matches";
      pager(document.getElementById("pager"), st.page, count,
        function (p) { st.page = p; render(); });
    }

    update();
  }

  /* ---- an episode page: frames and firing log -------------------------------------- */

  function frameViewer(frames) {
    var box = document.getElementById("frame");
    var slider = document.getElementById("step-slider");
    var label = document.getElementById("frame-label");
    var play = document.getElementById("play");
    var w = frames.width * frames.scale, h = frames.height * frames.scale;
    box.style.width = w + "px";
    box.style.height = h + "px";
    box.style.backgroundImage = "url(\"" + frames.sheet + "\")";
    box.style.backgroundSize = (frames.cols * w) + "px auto";
    var timer = null;

    function show(i) {
      i = Math.max(0, Math.min(frames.count - 1, i));
      slider.value = String(i);
      box.style.backgroundPosition = (-(i % frames.cols) * w) + "px " +
        (-Math.floor(i / frames.cols) * h) + "px";
      box.setAttribute("data-frame", String(i));
      label.textContent = "step " + frames.steps[i] + " \u00b7 frame " + (i + 1) + " of " +
        frames.count;
    }
    function stop() {
      if (timer !== null) { clearInterval(timer); timer = null; }
      play.textContent = "Play";
    }
    slider.addEventListener("input", function () { stop(); show(Number(slider.value)); });
    play.addEventListener("click", function () {
      if (timer !== null) { stop(); return; }
      play.textContent = "Pause";
      timer = setInterval(function () {
        show((Number(slider.value) + 1) % frames.count);
      }, 250);
    });
    show(0);
  }

  function logTable(log) {
    var table = document.getElementById("log-table");
    var shownCols = ["line", "step", "event", "node", "dur_ms", "detail"];
    var col = {};
    log.columns.forEach(function (name, i) { col[name] = i; });
    var head = el("tr");
    shownCols.forEach(function (name) { head.appendChild(el("th", { scope: "col" }, name)); });
    table.tHead.appendChild(head);
    var count = Math.ceil(log.records.length / LOG_PAGE);

    function render(page) {
      var body = document.createElement("tbody");
      log.records.slice(page * LOG_PAGE, (page + 1) * LOG_PAGE).forEach(function (rec) {
        var error = rec[col.error];
        var tr = el("tr", { "class": "event-" + rec[col.event] });
        shownCols.forEach(function (name) {
          var td = el("td", { "data-col": name });
          if (name === "detail" && error) {
            var lines = error.trim().split("\n");
            var details = el("details");
            details.appendChild(el("summary", null, "error: " + lines[lines.length - 1]));
            details.appendChild(el("pre", null, error));
            td.appendChild(details);
          } else {
            td.textContent = shown(rec[col[name]]);
          }
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      table.replaceChild(body, table.tBodies[0]);
      pager(document.getElementById("log-pager"), page, count, render);
    }
    render(0);
  }

  if (window.EVALTUI_EPISODES) { episodeTable(window.EVALTUI_EPISODES); }
  if (window.EVALTUI_EPISODE) {
    if (window.EVALTUI_EPISODE.frames) { frameViewer(window.EVALTUI_EPISODE.frames); }
    logTable(window.EVALTUI_EPISODE.log);
  }
}());
