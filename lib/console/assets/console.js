// The rabbit-retry console's page. Plain JavaScript, no dependencies. Every
// value from the broker is written with text nodes (textContent), never parsed
// as HTML.
(function () {
  'use strict';

  var TOKEN_HEADER = 'x-rabbit-retry-token';
  var TOKEN_KEY = 'rabbit-retry-console-token';
  var base = location.pathname.replace(/index\.html$/, '');
  if (base.slice(-1) !== '/') base += '/';

  var S = {
    token: null,
    state: null,
    selected: null,
    rate: null,
    groups: {}, // queue -> answer of api/queues/<q>/groups
    settled: {}, // queue -> key -> { group, note }
    absorbed: {}, // job id -> true: its end was taken into a new grouping
    open: null, // key of the opened group
    openMessages: null, // { key, messages, scanned, truncated } or { key, error }
    lastGrouped: {}, // queue -> Date.now() of the last reading
    reading: {}, // queue -> true while a reading is asked
    pollTimer: null,
    rateInput: null,
    detailsOpen: {}, // message key -> whether its details are open
  };

  // ---------------------------------------------------------------------------
  // DOM

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === undefined || v === null || v === false) return;
        if (k === 'class') el.className = v;
        else if (k === 'text') el.textContent = String(v);
        else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
        else if (k === 'disabled' || k === 'open') el[k] = Boolean(v);
        else if (k === 'style') Object.keys(v).forEach(function (p) { el.style[p] = v[p]; });
        else el.setAttribute(k, String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }

  function add(el, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) {
      child.forEach(function (c) { add(el, c); });
      return;
    }
    el.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }

  function $(id) { return document.getElementById(id); }

  function replace(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    for (var i = 1; i < arguments.length; i++) add(el, arguments[i]);
  }

  function n(x) { return typeof x === 'number' ? x.toLocaleString('en-US') : '–'; }

  function pad(x) { return (x < 10 ? '0' : '') + x; }

  function when(iso) {
    if (!iso) return '–';
    var d = new Date(iso);
    if (isNaN(d.getTime())) return String(iso);
    var t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    var now = new Date();
    if (d.toDateString() === now.toDateString()) return t;
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + t;
  }

  function ms(x) {
    if (x < 1000) return x + ' ms';
    if (x < 60000) return (x / 1000).toFixed(1) + ' s';
    if (x < 3600000) return Math.round(x / 60000) + ' min';
    return (x / 3600000).toFixed(1) + ' h';
  }

  var toastTimer = null;
  function toast(text, isError) {
    var t = $('toast');
    t.textContent = text;
    t.className = 'toast' + (isError ? ' error' : '');
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { t.hidden = true; }, isError ? 8000 : 4000);
  }

  // ---------------------------------------------------------------------------
  // Token and API

  function readToken() {
    var meta = document.querySelector('meta[name="rabbit-retry-token"]');
    if (meta && meta.getAttribute('content')) return meta.getAttribute('content');
    var m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (m) {
      var t = decodeURIComponent(m[1]);
      sessionStorage.setItem(TOKEN_KEY, t);
      history.replaceState(null, '', location.pathname + location.search);
      return t;
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function showLogin(message) {
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('login-token').focus();
  }

  function ApiError(status, code, message) {
    this.status = status;
    this.code = code;
    this.message = message;
  }

  function api(path, body) {
    var headers = {};
    headers[TOKEN_HEADER] = S.token || '';
    var init = { method: body ? 'POST' : 'GET', headers: headers, cache: 'no-store' };
    if (body) {
      headers['content-type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch(base + 'api/' + path, init).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (data) {
        if (res.ok) return data;
        var e = (data && data.error) || {};
        if (res.status === 401) showLogin(S.token ? 'That token was refused.' : '');
        throw new ApiError(res.status, e.code || 'HTTP_' + res.status, e.message || res.statusText);
      });
    });
  }

  function q(name) { return encodeURIComponent(name); }

  // ---------------------------------------------------------------------------
  // Confirmation

  var pending = null;
  function confirmAction(title, text, okText, danger) {
    $('modal-title').textContent = title;
    $('modal-text').textContent = text;
    var ok = $('modal-ok');
    ok.textContent = okText;
    ok.className = danger ? 'danger solid' : '';
    $('modal').hidden = false;
    ok.focus();
    return new Promise(function (resolve) { pending = resolve; });
  }
  function closeModal(answer) {
    $('modal').hidden = true;
    if (pending) {
      var p = pending;
      pending = null;
      p(answer);
    }
  }

  // ---------------------------------------------------------------------------
  // Counts

  function jobsOf(queue) {
    return ((S.state && S.state.jobs) || []).filter(function (j) { return j.queue === queue; });
  }
  function activeJobs(queue) {
    return jobsOf(queue).filter(function (j) { return j.state === 'queued' || j.state === 'running'; });
  }
  function anyActive() {
    return ((S.state && S.state.jobs) || []).some(function (j) { return j.state === 'queued' || j.state === 'running'; });
  }

  /** A group's count, less what the jobs since its reading moved. */
  function liveCount(queue, g) {
    var answer = S.groups[queue];
    var c = g.count;
    jobsOf(queue).forEach(function (j) {
      if (answer && j.id >= answer.jobsFrom) c -= j.byGroup[g.key] || 0;
    });
    return Math.max(0, c);
  }

  function queueView(name) {
    var list = (S.state && S.state.queues) || [];
    for (var i = 0; i < list.length; i++) if (list[i].queue === name) return list[i];
    return null;
  }

  // ---------------------------------------------------------------------------
  // Reading

  function readGroups(queue, refresh) {
    if (S.reading[queue]) return Promise.resolve();
    S.reading[queue] = true;
    var before = S.groups[queue];
    return api('queues/' + q(queue) + '/groups' + (refresh ? '?refresh=1' : ''))
      .then(function (answer) {
        if (before && before.grouping && answer.grouping && answer.grouping !== before.grouping) keepSettled(queue, before, answer);
        S.groups[queue] = answer;
        S.lastGrouped[queue] = Date.now();
        if (S.open && answer.grouping && !answer.busy) {
          var still = answer.grouping.groups.some(function (g) { return g.key === S.open; });
          if (still) loadMessages(queue, S.open);
          else { S.open = null; S.openMessages = null; }
        }
        render();
      })
      .catch(function (e) { if (e.status !== 401) toast('Reading ' + queue + ' failed: ' + e.message, true); })
      .then(function () { S.reading[queue] = false; });
  }

  /** Groups a finished job emptied stay on the page, at 0, until the queue is read again by hand. */
  function keepSettled(queue, before, answer) {
    var now = {};
    answer.grouping.groups.forEach(function (g) { now[g.key] = true; });
    var kept = S.settled[queue] || (S.settled[queue] = {});
    jobsOf(queue).forEach(function (j) {
      if (j.id < before.jobsFrom || j.state === 'queued' || j.state === 'running') return;
      S.absorbed[j.id] = true;
      Object.keys(j.byGroup).forEach(function (key) {
        if (now[key]) return;
        var g = before.grouping.groups.filter(function (x) { return x.key === key; })[0];
        if (!g) return;
        var verb = j.kind === 'replay' ? 'replayed' : 'purged';
        kept[key] = { group: g, note: verb + ' ' + j.byGroup[key] + ' at ' + when(j.finishedAt) };
      });
    });
  }

  function loadMessages(queue, key) {
    api('queues/' + q(queue) + '/groups/' + key + '/messages?limit=20')
      .then(function (r) {
        if (S.open !== key) return;
        S.openMessages = { key: key, messages: r.messages, scanned: r.scanned, truncated: r.truncated };
        render();
      })
      .catch(function (e) {
        if (S.open !== key) return;
        S.openMessages = { key: key, error: e.message };
        render();
      });
  }

  /** Reads the selected queue again when a job on it ended, or its parked depth moved. */
  function maybeRead() {
    var queue = S.selected;
    if (!queue || S.reading[queue]) return;
    var answer = S.groups[queue];
    var view = queueView(queue);
    if (!answer) return readGroups(queue, false);
    if (!view || view.busy) return;
    var ended = jobsOf(queue).some(function (j) {
      return j.id >= answer.jobsFrom && !S.absorbed[j.id] && j.state !== 'queued' && j.state !== 'running';
    });
    if (ended) return readGroups(queue, true);
    var g = answer.grouping;
    if (!g) return readGroups(queue, true);
    var took = g.tookMs || 0;
    var gap = Math.max(3000, took * 10);
    if (view.parked !== null && view.parked !== g.depth && Date.now() - (S.lastGrouped[queue] || 0) > gap) readGroups(queue, true);
  }

  function poll() {
    clearTimeout(S.pollTimer);
    api('state')
      .then(function (state) {
        S.state = state;
        if (S.rate === null) S.rate = state.ratePerSec;
        if (!S.selected && state.queues.length) {
          var withParked = state.queues.filter(function (x) { return x.parked; })[0];
          select((withParked || state.queues[0]).queue);
        }
        render();
        maybeRead();
      })
      .catch(function (e) {
        if (e.status !== 401) $('updated').textContent = 'not updated: ' + e.message;
      })
      .then(function () {
        S.pollTimer = setTimeout(poll, anyActive() ? 700 : 2000);
      });
  }

  function select(queue) {
    if (S.selected !== queue) {
      S.open = null;
      S.openMessages = null;
    }
    S.selected = queue;
    S.settled[queue] = {};
    render();
    readGroups(queue, true);
  }

  // ---------------------------------------------------------------------------
  // Actions

  function rate() {
    var v = Number(S.rate);
    return v > 0 ? v : 20;
  }

  function started(job) {
    toast((job.kind === 'replay' ? 'Replay' : 'Purge') + ' started: ' + job.label);
    poll();
  }

  function failed(e) {
    if (e && e.status !== 401) toast(e.message, true);
  }

  function replayGroup(queue, g) {
    var count = liveCount(queue, g);
    var r = rate();
    confirmAction(
      'Replay ' + count + ' message' + (count === 1 ? '' : 's') + '?',
      'The ' + count + ' parked message' + (count === 1 ? '' : 's') + ' of "' + g.errorName + ': ' + g.message + '" go back to ' + queue +
        ' at ' + r + ' a second, with retry-attempt reset to 0.',
      'Replay ' + count,
    ).then(function (ok) {
      if (!ok) return;
      api('queues/' + q(queue) + '/replay', { scope: 'group', key: g.key, count: count, ratePerSec: r }).then(function (a) { started(a.job); }, failed);
    });
  }

  function purgeGroup(queue, g) {
    var count = liveCount(queue, g);
    confirmAction(
      'Purge ' + count + ' message' + (count === 1 ? '' : 's') + '?',
      'The ' + count + ' parked message' + (count === 1 ? '' : 's') + ' of "' + g.errorName + ': ' + g.message + '" are deleted for good. The other parked messages stay, in their order.',
      'Purge ' + count + ' message' + (count === 1 ? '' : 's'),
      true,
    ).then(function (ok) {
      if (!ok) return;
      api('queues/' + q(queue) + '/purge', { scope: 'group', key: g.key, count: count }).then(function (a) { started(a.job); }, failed);
    });
  }

  function replayQueue(queue, count) {
    var r = rate();
    confirmAction(
      'Replay ' + count + ' parked message' + (count === 1 ? '' : 's') + '?',
      'Every parked message of ' + queue + ', at most ' + count + ', goes back to the work queue at ' + r + ' a second, with retry-attempt reset to 0.',
      'Replay ' + count,
    ).then(function (ok) {
      if (!ok) return;
      api('queues/' + q(queue) + '/replay', { scope: 'queue', count: count, ratePerSec: r }).then(function (a) { started(a.job); }, failed);
    });
  }

  function messageName(m) { return m.messageId ? 'message ' + m.messageId : 'message #' + (m.position + 1); }

  function replayMessage(queue, m) {
    confirmAction('Replay 1 message?', messageName(m) + ' goes back to ' + queue + ', with retry-attempt reset to 0.', 'Replay 1').then(function (ok) {
      if (!ok) return;
      api('queues/' + q(queue) + '/replay', { scope: 'message', key: m.key, count: 1, ratePerSec: rate() }).then(function (a) { started(a.job); }, failed);
    });
  }

  function purgeMessage(queue, m) {
    confirmAction('Purge 1 message?', messageName(m) + ' is deleted for good.', 'Purge 1 message', true).then(function (ok) {
      if (!ok) return;
      api('queues/' + q(queue) + '/purge', { scope: 'message', key: m.key, count: 1 }).then(function (a) { started(a.job); }, failed);
    });
  }

  function stopJob(job) {
    api('jobs/' + job.id + '/stop', {}).then(poll, failed);
  }

  function tableAction(action, body, what) {
    api('table/' + action, body).then(function (r) {
      toast(what + ': ' + r.rows + ' row' + (r.rows === 1 ? '' : 's'));
      poll();
    }, failed);
  }

  function toggleGroup(queue, key) {
    if (S.open === key) {
      S.open = null;
      S.openMessages = null;
    } else {
      S.open = key;
      S.openMessages = null;
      loadMessages(queue, key);
    }
    render();
  }

  // ---------------------------------------------------------------------------
  // Rendering

  function render() {
    var st = S.state;
    if (!st) return;
    $('broker').textContent = 'broker ' + st.broker;
    var m = $('management');
    m.textContent =
      st.management.state === 'ok'
        ? 'management API: ' + st.management.detail
        : st.management.state === 'off'
          ? 'management API not asked'
          : 'management API not answering (' + st.management.detail + ')';
    m.className = st.management.state === 'ok' ? 'good' : st.management.state === 'off' ? '' : 'bad';
    $('updated').textContent = 'updated ' + when(st.at);
    var queue = S.selected;
    var answer = queue ? S.groups[queue] : null;
    once('queues', [st.queues, S.selected], function () { renderQueues(st); });
    once('queue', [queue && queueView(queue), answer, queue && jobsOf(queue), S.open, openSig(), queue && S.settled[queue], queue && S.reading[queue]], function () { renderQueue(st); });
    once('jobs', [st.jobs], function () { renderJobs(st); });
    once('table', [st.table, st.tableError], function () { renderTable(st); });
  }

  function openSig() {
    var o = S.openMessages;
    if (!o) return null;
    return [o.key, o.error || null, o.messages ? o.messages.map(function (m) { return m.key; }) : null];
  }

  /** Runs `draw` when `data` differs from the last time `part` was drawn: what the operator opened or types survives a poll. */
  var drawn = {};
  function once(part, data, draw) {
    var sig = JSON.stringify(data);
    if (drawn[part] === sig) return;
    drawn[part] = sig;
    draw();
  }

  function renderQueues(st) {
    var list = $('queue-list');
    replace(
      list,
      st.queues.map(function (x) {
        var retry = x.retry.reduce(function (a, r) { return a + r.messages; }, 0);
        return h(
          'li',
          null,
          h(
            'button',
            { class: 'queue-item' + (x.queue === S.selected ? ' selected' : ''), 'data-queue': x.queue, onclick: function () { select(x.queue); } },
            h('span', { class: 'name', text: x.queue }),
            h(
              'span',
              { class: 'badges' },
              h('span', { class: 'badge parked' + (x.parked ? '' : ' zero'), text: n(x.parked || 0) + ' parked' }),
              h('span', { class: 'badge' + (retry ? ' warn' : ' zero'), text: n(retry) + ' retrying' }),
              x.work ? h('span', { class: 'badge zero', text: n(x.work.messages) + ' ready' }) : null,
              x.busy ? h('span', { class: 'badge', text: 'acting' }) : null,
            ),
          ),
        );
      }),
    );
    $('queue-note').textContent = st.queues.length
      ? 'Listed from ' + sourcesText(st) + '.'
      : 'No work queue known yet: name queues on the command line (rabbit-retry ui <queue>…), consume in this process, or enable the management API.';
  }

  function sourcesText(st) {
    var seen = {};
    st.queues.forEach(function (x) { x.sources.forEach(function (s) { seen[s] = true; }); });
    var words = { consumer: 'this process’s consumers', named: 'the queues named to the console', management: 'the management API' };
    return Object.keys(seen).map(function (s) { return words[s] || s; }).join(', ');
  }

  function tile(label, value, cls, sub) {
    return h('div', { class: 'tile' + (cls ? ' ' + cls : '') }, h('span', { class: 'label', text: label }), h('span', { class: 'value', text: value }), sub ? h('span', { class: 'sub', text: sub }) : null);
  }

  function renderQueue(st) {
    var panel = $('queue');
    var queue = S.selected;
    var view = queue && queueView(queue);
    if (!view) {
      replace(panel);
      return;
    }
    var answer = S.groups[queue];
    var grouping = answer && answer.grouping;
    var active = activeJobs(queue);
    var tiles = [tile('work', view.work ? n(view.work.messages) : 'missing', '', view.work ? view.work.consumers + ' consumer' + (view.work.consumers === 1 ? '' : 's') : '')];
    view.retry.forEach(function (r) { tiles.push(tile('retry ' + r.delay, n(r.messages))); });
    tiles.push(tile('parked', view.parked === null ? 'missing' : n(view.parked), view.parked ? 'parked' : ''));
    if (view.tableRows !== null) tiles.push(tile('retry table', n(view.tableRows), '', 'rows'));

    var rateInput = S.rateInput;
    if (!rateInput) {
      rateInput = S.rateInput = h('input', {
        type: 'number', min: '0.1', step: 'any', id: 'rate', value: String(rate()), 'aria-label': 'replay rate',
        oninput: function (e) { S.rate = e.target.value; },
      });
    }
    var focused = document.activeElement === rateInput;
    var parkedCount = view.parked || 0;
    var controls = h(
      'div',
      { class: 'controls' },
      h('label', null, 'Replay rate ', rateInput, ' messages/s'),
      h('button', { 'data-action': 'replay-queue', disabled: !parkedCount || active.length > 0, onclick: function () { replayQueue(queue, parkedCount); } }, 'Replay all ' + n(parkedCount) + ' parked'),
      h('button', { class: 'secondary', 'data-action': 'regroup', disabled: active.length > 0, onclick: function () { S.settled[queue] = {}; readGroups(queue, true); } }, 'Read again'),
    );

    var scan = null;
    if (grouping) {
      var text = grouping.truncated
        ? 'Grouped the first ' + n(grouping.scanned) + ' of ' + n(grouping.depth) + ' parked messages (the rest were not read) in ' + ms(grouping.tookMs) + ', at ' + when(grouping.at) + '.'
        : 'Grouped all ' + n(grouping.scanned) + ' parked messages in ' + ms(grouping.tookMs) + ', at ' + when(grouping.at) + '.';
      if (answer.busy) text += ' A replay or purge is running: counts follow its progress.';
      scan = h('p', { class: 'scan' + (grouping.truncated ? ' truncated' : ''), id: 'scan', text: text });
    } else {
      scan = h('p', { class: 'scan', id: 'scan', text: S.reading[queue] ? 'Reading the parked messages…' : answer && answer.busy ? 'A replay or purge is running; the messages are read when it ends.' : '' });
    }

    replace(
      panel,
      h('div', { class: 'queue-head' }, h('h2', { text: queue }), view.sources.map(function (s) { return h('span', { class: 'badge source', text: s }); })),
      h('div', { class: 'tiles' }, tiles),
      controls,
      scan,
      grouping ? groupsTable(queue, grouping, active) : null,
    );
    if (focused) rateInput.focus();
  }

  function groupsTable(queue, grouping, active) {
    var settled = S.settled[queue] || {};
    var rows = [];
    var shown = {};
    grouping.groups.forEach(function (g) {
      shown[g.key] = true;
      rows.push(groupRow(queue, g, liveCount(queue, g), active, null));
      if (S.open === g.key) rows.push(openRow(queue, g));
    });
    Object.keys(settled).forEach(function (key) {
      if (shown[key]) return;
      rows.push(groupRow(queue, settled[key].group, 0, active, settled[key].note));
    });
    if (!rows.length) return h('p', { class: 'empty', text: 'No parked messages.' });
    return h(
      'table',
      { class: 'groups' },
      h(
        'thead',
        null,
        h('tr', null, h('th', { class: 'num', text: 'Count' }), h('th', { text: 'Error' }), h('th', { class: 'hide-narrow', text: 'Reason' }), h('th', { text: 'First failure' }), h('th', { text: 'Last failure' }), h('th', { class: 'hide-narrow', text: 'Example' }), h('th')),
      ),
      h('tbody', null, rows),
    );
  }

  function groupRow(queue, g, count, active, settledNote) {
    var job = active.filter(function (j) { return j.scope === 'group' && j.key === g.key; })[0];
    var busy = active.length > 0;
    var reasons = Object.keys(g.reasons).map(function (r) { return h('span', { class: 'badge zero', text: r + ' ' + g.reasons[r] }); });
    var progress = job
      ? h(
          'div',
          null,
          h('div', { class: 'progress' + (job.kind === 'purge' ? ' purge' : '') }, h('div', { style: { width: Math.round((100 * job.done) / Math.max(1, job.total)) + '%' } })),
          h('span', { class: 'progress-text', text: (job.state === 'queued' ? 'waiting to ' : job.kind === 'replay' ? 'replaying ' : 'purging ') + job.done + ' of ' + job.total + (job.ratePerSec ? ' at ' + job.ratePerSec + '/s' : '') }),
        )
      : null;
    return h(
      'tr',
      { class: 'group' + (settledNote ? ' settled' : '') + (S.open === g.key ? ' opened' : ''), 'data-key': g.key },
      h('td', { class: 'count', text: n(count) }),
      h(
        'td',
        null,
        h('div', { class: 'ename', text: g.errorName }),
        h('div', { class: 'emsg mono', text: g.message || '(no message)' }),
        g.frame ? h('div', { class: 'frame mono', text: 'at ' + g.frame }) : null,
        settledNote ? h('div', { class: 'settled-note', text: settledNote }) : null,
        progress,
      ),
      h('td', { class: 'hide-narrow' }, reasons),
      h('td', { class: 'when', text: when(g.firstFailedAt) }),
      h('td', { class: 'when', text: when(g.lastFailedAt) }),
      h('td', { class: 'hide-narrow mono example', text: g.example.messageId || g.example.correlationId || '–', title: g.example.error || '' }),
      h(
        'td',
        null,
        settledNote
          ? null
          : h(
              'div',
              { class: 'actions' },
              h('button', { class: 'secondary', 'data-action': 'open', disabled: busy && S.open !== g.key, onclick: function () { toggleGroup(queue, g.key); } }, S.open === g.key ? 'Close' : 'Open'),
              h('button', { 'data-action': 'replay', disabled: busy || count === 0, onclick: function () { replayGroup(queue, g); } }, 'Replay'),
              h('button', { class: 'danger', 'data-action': 'purge', disabled: busy || count === 0, onclick: function () { purgeGroup(queue, g); } }, 'Purge'),
            ),
      ),
    );
  }

  function openRow(queue, g) {
    var o = S.openMessages;
    var content;
    if (!o || o.key !== g.key) content = h('p', { class: 'empty', text: 'Reading the messages…' });
    else if (o.error) content = h('p', { class: 'error', text: o.error });
    else {
      var more = g.count > o.messages.length ? 'The first ' + o.messages.length + ' of ' + n(g.count) + ' messages of this group.' : '';
      content = h(
        'div',
        { class: 'messages' },
        more ? h('p', { class: 'note', text: more }) : null,
        o.messages.map(function (m, i) { return messageCard(queue, m, i === 0); }),
      );
    }
    return h('tr', { class: 'group-open' }, h('td', { colspan: '7' }, content));
  }

  function pre(text) { return h('pre', { text: text }); }

  /** The headers, with the stack (shown on its own above) left out. */
  function headersShown(headers) {
    var out = {};
    Object.keys(headers || {}).forEach(function (k) {
      out[k] = k === 'retry-error-stack' ? '(the stack above)' : headers[k];
    });
    return out;
  }

  function messageCard(queue, m, open) {
    var busy = activeJobs(queue).length > 0;
    var body = m.body;
    var bodyTitle = 'Body (' + body.kind + ', ' + n(body.bytes) + ' bytes' + (body.truncated ? ', the start only' : '') + ')';
    return h(
      'div',
      { class: 'message', 'data-message': m.key },
      h(
        'div',
        { class: 'message-head' },
        h('span', { class: 'id', text: m.messageId || '(no message id)' }),
        m.correlationId ? h('span', { class: 'note', text: 'correlation ' + m.correlationId }) : null,
        h('span', { class: 'badge zero', text: m.reason || 'unknown' }),
        h('span', { class: 'note', text: 'attempt ' + m.attempt + ' · failed ' + when(m.failedAt) + ' · #' + (m.position + 1) + ' in the queue' }),
        h(
          'div',
          { class: 'actions' },
          h('button', { class: 'secondary', 'data-action': 'replay-message', disabled: busy, onclick: function () { replayMessage(queue, m); } }, 'Replay'),
          h('button', { class: 'danger', 'data-action': 'purge-message', disabled: busy, onclick: function () { purgeMessage(queue, m); } }, 'Purge'),
        ),
      ),
      h(
        'details',
        {
          open: S.detailsOpen[m.key] === undefined ? open : S.detailsOpen[m.key],
          ontoggle: function (e) { S.detailsOpen[m.key] = e.target.open; },
        },
        h('summary', { text: (m.errorName || 'Error') + ': ' + (m.error || '') }),
        h(
          'div',
          { class: 'parts' },
          h('div', { class: 'part wide' }, h('h4', { text: bodyTitle }), pre(body.kind === 'empty' ? '(empty)' : body.text)),
          h('div', { class: 'part wide' }, h('h4', { text: 'Stack' }), pre(m.stack || '(none)')),
          h('div', { class: 'part' }, h('h4', { text: 'Headers' }), pre(JSON.stringify(headersShown(m.headers), null, 2))),
          h('div', { class: 'part' }, h('h4', { text: 'Properties' }), pre(JSON.stringify(m.properties, null, 2))),
        ),
      ),
    );
  }

  function renderJobs(st) {
    var panel = $('jobs');
    var jobs = st.jobs.slice().reverse().slice(0, 12);
    if (!jobs.length) {
      replace(panel);
      return;
    }
    replace(
      panel,
      h('h2', { text: 'Replays and purges' }),
      h(
        'table',
        { class: 'jobs' },
        h('thead', null, h('tr', null, h('th', { text: 'Action' }), h('th', { text: 'Queue' }), h('th', { text: 'Of' }), h('th', { text: 'State' }), h('th', { text: 'Progress' }), h('th', { text: 'Started' }), h('th'))),
        h(
          'tbody',
          null,
          jobs.map(function (j) {
            var going = j.state === 'queued' || j.state === 'running';
            return h(
              'tr',
              { 'data-job': j.id },
              h('td', { text: j.kind + (j.ratePerSec ? ' at ' + j.ratePerSec + '/s' : '') }),
              h('td', { class: 'mono', text: j.queue }),
              h('td', { class: 'emsg', text: j.label }),
              h('td', null, h('span', { class: 'state-' + j.state, text: j.state }), j.error ? h('div', { class: 'error', text: j.error.code + ': ' + j.error.message }) : null),
              h(
                'td',
                null,
                h('span', { class: 'progress-text', text: j.done + ' of ' + j.total + (!going && typeof j.left === 'number' ? '; ' + j.left + ' left parked' : '') }),
                h('div', { class: 'progress' + (j.kind === 'purge' ? ' purge' : '') }, h('div', { style: { width: Math.round((100 * j.done) / Math.max(1, j.total)) + '%' } })),
              ),
              h('td', { class: 'when', text: when(j.startedAt || j.createdAt) }),
              h('td', null, going ? h('button', { class: 'secondary', onclick: function () { stopJob(j); } }, 'Stop') : null),
            );
          }),
        ),
      ),
    );
  }

  function renderTable(st) {
    var panel = $('table');
    var t = st.table;
    if (!t) {
      replace(
        panel,
        h('h2', { text: 'Retry table' }),
        h('p', { class: st.tableError ? 'error' : 'note', text: st.tableError || 'No retry table: start the console with --db postgres://… (or RETRY_TABLE_URL), or connect its client with { retryTable: { url } }.' }),
      );
      return;
    }
    var deps = t.dependencies.map(function (d) {
      var name = d.dependency === null ? '(none)' : d.dependency;
      var actions = d.dependency === null
        ? null
        : h(
            'div',
            { class: 'actions' },
            d.pauseInForce
              ? h('button', { 'data-action': 'resume', onclick: function () { tableAction('resume', { dependency: d.dependency }, 'Resumed ' + name); } }, 'Resume')
              : h('button', { class: 'secondary', 'data-action': 'pause', onclick: function () { tableAction('pause', { dependency: d.dependency }, 'Paused ' + name); } }, 'Pause'),
            h('button', { class: 'secondary', 'data-action': 'retry-now', disabled: !d.rows, onclick: function () { tableAction('retry-now', { dependency: d.dependency }, 'Due now in ' + name); } }, 'Retry now'),
          );
      return h(
        'tr',
        { 'data-dependency': name },
        h('td', { class: 'mono', text: name }),
        h('td', { class: 'num', text: n(d.rows) }),
        h('td', { class: 'num', text: n(d.paused) }),
        h('td', { class: 'num', text: n(d.held) }),
        h('td', { class: 'num', text: n(d.due) }),
        h('td', null, d.pauseInForce ? h('span', { class: 'badge warn', text: 'paused' }) : h('span', { class: 'badge ok', text: 'running' })),
        h('td', null, actions),
      );
    });
    var rows = t.oldest.map(function (r) {
      return h(
        'tr',
        null,
        h('td', { class: 'num', text: r.id }),
        h('td', { class: 'mono', text: r.queue }),
        h('td', { class: 'mono', text: r.dependency || '–' }),
        h('td', { class: 'num', text: r.attempt }),
        h('td', { class: 'when', text: r.paused ? 'paused' : r.nextAttemptAt ? when(r.nextAttemptAt) : 'held' }),
        h('td', { class: 'emsg', text: (r.errorName || 'Error') + ': ' + (r.lastError || '') }),
        h('td', null, h('button', { class: 'secondary', onclick: function () { tableAction('retry-now', { id: r.id }, 'Row ' + r.id + ' due now'); } }, 'Retry now')),
      );
    });
    replace(
      panel,
      h('h2', { text: 'Retry table' }),
      h(
        'div',
        { class: 'tiles' },
        tile('rows', n(t.rows)),
        tile('paused', n(t.paused)),
        tile('held', n(t.held), '', 'wait for a person'),
        tile('due', n(t.due)),
        tile('oldest due', t.oldestDueAgeMs ? ms(t.oldestDueAgeMs) : '–', '', t.oldestDueAgeMs ? 'ago' : 'none due'),
      ),
      t.truncated ? h('p', { class: 'scan truncated', text: 'Counted by dependency from the oldest ' + n(t.read) + ' of ' + n(t.rows) + ' rows.' }) : null,
      t.dependencies.length
        ? h(
            'table',
            { class: 'dependencies' },
            h('thead', null, h('tr', null, h('th', { text: 'Dependency' }), h('th', { class: 'num', text: 'Rows' }), h('th', { class: 'num', text: 'Paused' }), h('th', { class: 'num', text: 'Held' }), h('th', { class: 'num', text: 'Due' }), h('th', { text: 'State' }), h('th'))),
            h('tbody', null, deps),
          )
        : h('p', { class: 'empty', text: 'The retry table is empty.' }),
      rows.length
        ? [
            h('h2', { text: 'Oldest rows', style: { marginTop: '14px' } }),
            h(
              'table',
              null,
              h('thead', null, h('tr', null, h('th', { class: 'num', text: 'Id' }), h('th', { text: 'Queue' }), h('th', { text: 'Dependency' }), h('th', { class: 'num', text: 'Attempt' }), h('th', { text: 'Next attempt' }), h('th', { text: 'Error' }), h('th'))),
              h('tbody', null, rows),
            ),
          ]
        : null,
    );
  }

  // ---------------------------------------------------------------------------
  // Start

  document.addEventListener('DOMContentLoaded', function () {
    $('modal-cancel').addEventListener('click', function () { closeModal(false); });
    $('modal-ok').addEventListener('click', function () { closeModal(true); });
    document.addEventListener('keydown', function (e) {
      if (e.key === 'Escape' && !$('modal').hidden) closeModal(false);
    });
    $('login-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var t = $('login-token').value.trim();
      if (!t) return;
      S.token = t;
      sessionStorage.setItem(TOKEN_KEY, t);
      $('login').hidden = true;
      poll();
    });
    S.token = readToken();
    if (!S.token) showLogin('');
    else poll();
  });
})();
