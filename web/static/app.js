// seenapi dashboard: one ES module, no build step. It calls the REST API
// through the operation table generated from openapi.yaml (api.js), exactly
// as any client does, with the API key kept in sessionStorage.
import { operations, roles as ROLES } from './api.js';

document.documentElement.dataset.started = '1'; // boot.js reports a module that never got here

const KEY_STORE = 'seenapi.key';
const REFRESH_MS = 2000;
const HISTORY_MS = 5 * 60 * 1000;
// A call with no answer by then is given up, so that a stalled service (a stopped
// process, a lost network) is said so instead of leaving its last figures as current.
const ANSWER_MS = 10000;
// A namespace's purge: a million users take about 3.5 s, so a large one takes minutes.
const PURGE_ANSWER_MS = 15 * 60 * 1000;
// How long a call refused for its key's rate is sent again (see call).
const RATE_WAIT_MS = 15000;

const state = {
  key: sessionStorage.getItem(KEY_STORE) || '',
  // The key's role as GET /v1/auth answered it; see checkRole.
  role: { status: 'checking' },
  roleSeq: 0, // bumped on every check; a late answer for an older key is dropped
  roleCheck: Promise.resolve(), // the last check, settled once its answer is in
  recheck: null, // a check made again before a call without a key (see call), while it runs
  // What one call may send, as GET /v1/auth says: its items (max_candidates), its body's
  // bytes (max_body_bytes) and a user id's (max_user_bytes); 0 until known.
  limits: { items: 0, bodyBytes: 0, userBytes: 0 },
  samples: [], // successive /v1/stats answers: {t (ms), s (ServiceStats), own (the page's calls it may count)}
  statsError: null,
  namespaces: null,
  notServed: [], // namespaces stored and not served, from the last listing
  view: '',
  seq: 0, // bumped on every render; a late answer for an older view is dropped
  timer: 0,
  updated: '', // the footer's text on the overview (showUpdated)
  // The page's calls awaiting their answer, and how many it has sent: a call learns how many
  // of its own may have been in flight beside it at the service (see call's opts.beside).
  pending: 0,
  sent: 0,
};

// ---------- API ----------

// Where the API is: beside the page, in its directory. A proxy may serve the service under a
// path prefix (/seen/ passed on as /), where the contract's paths from the server's root
// (/v1/stats) would call the proxy's own root instead.
const API_ROOT = new URL('./', location.href);

/** The address of path, a path of openapi.yaml with its parameters filled, under API_ROOT. */
function apiURL(path) { return new URL(path.replace(/^\//, ''), API_ROOT); }

/** A failed call: the problem+json document the API answered, or one made up for a network failure. */
class Problem extends Error {
  constructor(status, doc) {
    super((doc && (doc.detail || doc.title)) || `HTTP ${status}`);
    this.status = status;
    this.type = (doc && doc.type) || '';
    this.title = (doc && doc.title) || '';
    this.detail = (doc && doc.detail) || '';
    this.errors = (doc && Array.isArray(doc.errors)) ? doc.errors : [];
  }
  /** The problem type's last path segment, e.g. "user-not-found". */
  get kind() { return this.type.split('/').pop(); }
  /** The call needs a key the service takes: its 401, or the page's own keyNeeded. */
  get needsKey() { return this.status === 401 || this.kind === KEY_NEEDED; }
}

const KEY_NEEDED = 'key-needed';
/**
 * The page's own problem for a call it does not send without a key, on a service with keys
 * (GET /healthz's key_required): the 401 the service would answer says no more, and is
 * counted in its errors.
 */
function keyNeeded() {
  return new Problem(0, { type: KEY_NEEDED, title: 'API key needed',
    detail: 'the service has API keys and none was entered; nothing was sent' });
}

/**
 * The problem of value as the path's parameter name, or null: the browser would resolve "." and
 * ".." as a path's steps and call another address.
 */
function unusableId(name, value) {
  if (value !== '.' && value !== '..') return null;
  return new Problem(0, { title: 'Unusable id', detail: `${name === 'user' ? 'a user id' : `the ${name}`} cannot be "${value}": ` +
    'a path cannot carry it, so the service refuses it' });
}

/**
 * Calls the operation named opId of openapi.yaml with params and an optional JSON body. Params
 * named in the path fill it; the others, unless undefined or empty, make the query string.
 * With opts.blob, a success answers the body as a Blob (an export's bytes) instead of JSON;
 * with opts.headers, it answers { body, headers } (an erase says in a header what it found);
 * opts.answerMs gives a call that takes long by design more than ANSWER_MS to answer.
 * opts.beside, an object, gets in its n how many other calls of the page's were awaiting
 * their answer at some point while this one was: the service may have been serving them.
 */
async function call(opId, params = {}, body, opts = {}) {
  const op = operations[opId];
  if (!op) throw new Error(`the dashboard calls ${opId}, which openapi.yaml does not define`);
  let path = op.path.replace(/\{(\w+)\}/g, (_, name) => {
    if (params[name] === undefined || params[name] === '') throw new Problem(0, { title: 'Missing input', detail: `${name} is required` });
    const unusable = unusableId(name, params[name]);
    if (unusable) throw unusable;
    return encodeURIComponent(params[name]);
  });
  const query = new URLSearchParams(Object.entries(params)
    .filter(([name, v]) => !op.params.includes(name) && v !== undefined && v !== '').map(([name, v]) => [name, String(v)]));
  if (query.size) path += `?${query}`;
  const key = state.key;
  if (keyProblem(key)) throw new Problem(0, { title: 'Unusable key', detail: keyProblem(key) });
  // Without a key, a service with keys refuses every call needing one, and counts each 401 in
  // its errors, which its operators watch: once GET /healthz (or, not passed, GET /v1/auth)
  // has said the service has keys, the page answers those calls itself until a key is
  // entered (an open service takes them). A check that got no answer (the service down,
  // stalled or restarting when the page loaded) is made again first, and until one says
  // whether the service needs a key, nothing is sent: when the service is back, the call
  // would otherwise be its first request, without a key.
  if (!key && op.role !== 'none' && opId !== 'getAuth') {
    if (state.role.status === 'unknown' && !state.role.keyless) {
      state.recheck = state.recheck || checkRole(true).finally(() => { state.recheck = null; });
      await state.recheck;
    }
    if (state.role.status === 'checking') await state.roleCheck;
    const r = state.role;
    if (!state.key && r.status === 'rejected' && r.problem) throw r.problem;
    if (!state.key && r.status === 'unknown' && !r.keyless) {
      throw r.problem || new Problem(0, { title: 'No answer', detail: r.detail });
    }
  }
  const headers = { Accept: `${opts.blob ? 'application/octet-stream' : 'application/json'}, application/problem+json` };
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method: op.method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  // A key past its rate is refused before any work is done (429 rate-limited), so the call
  // is sent again after the Retry-After the service gives, within RATE_WAIT_MS: a page
  // makes a few calls at once, more than a key of a request or two a second lets through.
  const deadline = Date.now() + RATE_WAIT_MS;
  let res; let text; let blob;
  const [othersBefore, sentBefore] = [state.pending, state.sent];
  state.pending++;
  state.sent++;
  try {
    for (;;) {
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(new DOMException('no answer', 'TimeoutError')), opts.answerMs || ANSWER_MS);
      init.signal = abort.signal;
      try {
        res = await fetch(apiURL(path), init);
        // An export's bytes take the time their size needs: the limit is on its answer's start.
        if (res.ok && opts.blob) { clearTimeout(timer); blob = await res.blob(); } else text = await res.text();
      } catch (e) {
        // A call that changes something may have been done before the answer was lost: a
        // connection cut after the service did it fails as one refused does.
        const unknown = op.role !== 'read' && op.role !== 'none' ? ' Whether it was done is unknown: look again before repeating it.' : '';
        if (e.name !== 'TimeoutError') throw new Problem(0, { title: 'No answer', detail: `The service did not answer (${e.message}). Is it running?${unknown}` });
        throw new Problem(0, { title: 'No answer', detail: `The service did not answer within ${duration((opts.answerMs || ANSWER_MS) / 1000)}: it may be stopped, stalled or overloaded.${unknown}` });
      } finally {
        clearTimeout(timer);
      }
      if (res.status !== 429 || key !== state.key) break;
      // Jitter spreads the page's calls refused together over the next second.
      const wait = (Number(res.headers.get('Retry-After')) || 1) * 1000 + Math.random() * 500;
      if (Date.now() + wait > deadline) break;
      await new Promise((resolve) => { setTimeout(resolve, wait); });
    }
  } finally {
    state.pending--;
    // Those awaiting when it was sent, and those sent after it, before its answer.
    if (opts.beside) opts.beside.n = othersBefore + (state.sent - sentBefore - 1);
  }
  let doc = null;
  try { doc = text ? JSON.parse(text) : null; } catch { /* not JSON: keep the text below */ }
  text = text || '';
  if (!res.ok) {
    const p = new Problem(res.status, doc && typeof doc === 'object' ? doc
      : { title: res.statusText, detail: text.trim().slice(0, 300) || `The service answered HTTP ${res.status}.` });
    learnRole(op, key, p);
    if (p.kind === 'too-many-candidates' || p.kind === 'body-too-large') await learnLimits();
    throw p;
  }
  learnRole(op, key, null);
  if (opts.headers) return { body: opts.blob ? blob : doc, headers: res.headers };
  return opts.blob ? blob : doc;
}

// ---------- role ----------

/**
 * Asks the service the key's role (GET /v1/auth): at load and whenever the key is
 * entered or forgotten, and again when an answer contradicts what is known.
 * Without a key, an open service answers admin; one with keys is not asked (see askRole).
 * A quiet check, made again while the role is unknown, shows the role as it was until its
 * answer: its "checking" would be read out at every refresh while the service is down.
 */
function checkRole(quiet) {
  state.roleCheck = askRole(quiet);
  return state.roleCheck;
}

async function askRole(quiet) {
  const seq = ++state.roleSeq;
  if (!quiet) setRole({ status: 'checking' });
  // GET /healthz said the service has no keys: a call without one may be sent.
  let keyless = false;
  try {
    // Without a key, GET /healthz says whether the service needs one: GET /v1/auth would be
    // answered 401 on a service with keys, one more in the errors its operators watch, at
    // every load of the page. Refused by a proxy passing / and /v1/ alone (a 4xx: for good),
    // GET /v1/auth says it, by its 401. Not answered (a 5xx or nothing: the service down or
    // restarting), the role is unknown, asked again before the next call (see call): the
    // service may be back by the time GET /v1/auth reaches it, and count its 401.
    if (!state.key) {
      const health = await call('getHealth').catch((e) => {
        if (!notPassed(e)) throw e;
        return null;
      });
      if (seq !== state.roleSeq) return;
      if (health && health.key_required) { setRole({ status: 'rejected', problem: keyNeeded() }); return; }
      keyless = !!health && health.key_required === false;
    }
    const a = await call('getAuth');
    if (seq === state.roleSeq) setRole({ status: 'known', role: a.role, open: !!a.open, rate: a.rate_limit, keyId: a.key_id, namespaces: a.namespaces });
    setLimits(a); // the service's, whatever the key
  } catch (e) {
    if (seq !== state.roleSeq) return;
    setRole(e.status === 401 ? { status: 'rejected', problem: e } : { status: 'unknown', detail: e.detail || e.message, problem: e, keyless });
  }
}

/**
 * Whether problem p, GET /healthz's, is a proxy's refusal to pass it: an answer of 4xx other
 * than those that say to ask again later (408, 429), rather than a 5xx or no answer at all.
 */
function notPassed(p) {
  return p.status >= 400 && p.status < 500 && p.status !== 408 && p.status !== 429;
}

/**
 * Asks the service its limits on one call again: a 413 too-many-candidates or body-too-large
 * means one was lowered since they were learnt (a restart with another --max-candidates or
 * --max-body-bytes), and the next list over it is then refused before it is sent.
 */
async function learnLimits() {
  try {
    setLimits(await call('getAuth'));
  } catch { /* not learnt: the service refuses the next list over its limit, as it did this one */ }
}

function setLimits(a) {
  state.limits = { items: a.max_candidates, bodyBytes: a.max_body_bytes, userBytes: a.max_user_bytes };
}

/**
 * Why the service would refuse user id u for its length, or '' when it would not (or its limit
 * is not known yet: the service then says it). Refused by the page, the id is not sent, and adds
 * no 400 to the service's errors.
 */
function userTooLong(u) {
  const max = state.limits.userBytes;
  const n = new TextEncoder().encode(u).length;
  return max && n > max ? `The user id is ${count(n, 'byte')}; the service takes at most ${count(max, 'byte')} (its --max-user-bytes).` : '';
}

function setRole(r) {
  state.role = r;
  showRole();
}

function level(role) { const i = ROLES.indexOf(role); return i < 0 ? 1 : i; }

/**
 * Keeps the role in step with what the service answers op sent with key: a 401
 * means the key is not (or no longer) known; a 403 names the key's role, which
 * the service's keys may have changed since the check; a success of something
 * the role was thought not to allow, with a key thought rejected, or after a
 * check that got no answer, asks again.
 */
function learnRole(op, key, problem) {
  if (key !== state.key || op.role === 'none') return;
  const r = state.role;
  if (!problem) {
    if (r.status === 'rejected' || r.status === 'unknown' || (r.status === 'known' && level(r.role) < level(op.role))) checkRole();
  } else if (problem.status === 401) {
    if (r.status !== 'rejected') { state.roleSeq++; setRole({ status: 'rejected', problem }); }
  } else if (problem.status === 403) {
    const said = /has role (read|write|admin)\b/.exec(problem.detail);
    if (!said) checkRole();
    else if (r.status !== 'known' || r.role !== said[1]) { state.roleSeq++; setRole({ status: 'known', role: said[1], open: false }); }
  }
}

// scopeWords names the namespaces a limited key may call, as GET /v1/auth
// lists them: empty when none of them is served (a name that may be another
// key is not shown).
function scopeWords(list) {
  if (list.length === 0) return 'no served namespace';
  return `${list.length === 1 ? 'namespace' : 'namespaces'} ${list.join(', ')} only`;
}

function roleText() {
  const r = state.role;
  switch (r.status) {
    case 'checking': return 'role: checking…';
    case 'rejected': return state.key ? 'key rejected' : 'role: no key (the service needs one)';
    case 'known': return (r.open ? 'role: admin (open service, no keys configured)' : `role: ${r.role}`) +
      (r.rate ? ` · at most ${rate(r.rate)}${NBSP}requests/s` : '') +
      (r.namespaces ? ` · ${scopeWords(r.namespaces)}` : '');
    default: return 'role: unknown';
  }
}

function showRole() {
  const out = document.getElementById('role');
  // The same text set again would be read out again (a live region).
  const text = roleText();
  if (out.textContent !== text) out.textContent = text;
  const r = state.role;
  out.title = r.status === 'unknown' ? `The role could not be checked: ${r.detail}`
    : r.status === 'known' && r.keyId ? `Key ${r.keyId}: the log names this key so in the admin actions it asks for` : '';
  for (const b of document.querySelectorAll('button[data-op]')) gate(b);
}

/**
 * Disables a button whose operation needs more than the key is known to have, saying why.
 * The role it needs is shown only when the key lacks it (or is rejected, or could not be
 * checked): beside an action the key may do, it would read as a warning.
 */
function gate(button) {
  const op = operations[button.dataset.op];
  const need = level(op.role);
  const hint = button.parentElement.querySelector('.need');
  const r = state.role;
  const short = r.status === 'known' && level(r.role) < need;
  button.disabled = short;
  if (!hint) return;
  const a = (x) => (x === 'admin' ? 'an admin' : `a ${x}`);
  if (short) hint.textContent = `needs ${a(op.role)} key; this key is ${r.role}`;
  else if (need > 1 && (r.status === 'rejected' || r.status === 'unknown')) hint.textContent = `needs ${a(op.role)} key`;
  else hint.textContent = ''; // the key has the role, or is being checked
}

// ---------- DOM helpers ----------

/** h builds an element: h('p', {class: 'x'}, 'text', child). Text is never parsed as HTML. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style') el.style.cssText = v; // CSSOM, allowed by a style-src 'self' policy
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/**
 * isolated wraps text in U+2068 and U+2069 (first-strong isolate, pop), for plain text such as
 * the page's title: bidi controls inside a user id then stop at its end. In the page a bdi
 * element (or code, isolated by the style sheet) does so without adding characters to copy.
 */
function isolated(text) { return `\u2068${text}\u2069`; }

const SVG = 'http://www.w3.org/2000/svg';
/** put replaces el's children, skipping null, undefined and false as h does. */
function put(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function s(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/**
 * wide puts a table of many columns in a box of its own that scrolls sideways when a narrow
 * window cannot hold them, rather than the whole page with its top bar; the box is named, and
 * takes the focus, so that a keyboard scrolls it too.
 */
function wide(label, table) {
  return h('div', { class: 'wide', role: 'region', 'aria-label': label, tabindex: 0 }, table);
}

/**
 * Ties the error shown in the element of id errorId to field, or unties it (errorId ''): the field
 * is said invalid and is described by the error before its own help, so that a screen reader back
 * in the field hears what is wrong with what was typed there, until it is changed.
 */
function fieldError(field, errorId) {
  if (field.dataset.help === undefined) field.dataset.help = field.getAttribute('aria-describedby') || '';
  const ids = `${errorId} ${field.dataset.help}`.trim();
  if (errorId) field.setAttribute('aria-invalid', 'true'); else field.removeAttribute('aria-invalid');
  if (ids) field.setAttribute('aria-describedby', ids); else field.removeAttribute('aria-describedby');
}

/**
 * What problem p says, in a problem's box or in the banner: its status and title, its detail
 * (with the attributes detailAttrs: the banner's id), what to do where the page knows (a key
 * missing, not known or lacking a role, a namespace not served), and the errors it lists.
 */
function problemParts(p, detailAttrs = {}) {
  const parts = [p.status ? h('span', { class: 'status' }, `${p.status}${p.title ? ' ' + p.title : ''}:`) : h('span', { class: 'status' }, `${p.title || 'Error'}:`),
    ' ', // in the text, not a margin: the problem is read aloud and copied into tickets
    h('span', { class: 'detail', ...detailAttrs }, p.detail || p.message || String(p))];
  if (p.needsKey) {
    const role = keyRole(state.key);
    parts.push(h('div', { class: 'hint' }, !state.key ? 'Enter an API key in the bar at the top (a read key is enough to look).'
      : role ? `The service does not take the key entered, which begins with "${role}" as a line of a keys file does (seenapi new-key ` +
        'writes one): the key is what follows the colon. Enter it alone in the bar at the top.'
        : 'The service does not take the key entered: enter another in the bar at the top (a read key is enough to look).'));
  }
  // A key the service knows but refuses here (403): the detail says what it lacks, the hint
  // what to do. A 403 of another cause (a browser's origin, a proxy) gets none.
  const need = p.status === 403 && /needs role (read|write|admin)\b/.exec(p.detail);
  if (need) {
    parts.push(h('div', { class: 'hint' }, `The service refused this key: enter ${need[1] === 'admin' ? 'an admin key' : `a ${need[1]} key${need[1] === 'read' ? '' : ' (or an admin key)'}`} ` +
      'in the bar at the top to do this.'));
  } else if (p.status === 403 && /limited to the namespaces/.test(p.detail)) {
    parts.push(h('div', { class: 'hint' }, 'The service refused this key here: enter a key for this namespace in the bar at the top.'));
  }
  if (p.kind === 'unknown-namespace') {
    // The detail names the API's listing; the dashboard has a page of it.
    parts.push(h('div', { class: 'hint' }, 'The ', h('a', { href: '#/ns' }, 'Namespaces page'),
      ' lists those served, and those whose users are stored but no longer served, whose data it can erase.'));
  }
  if (p.errors && p.errors.length) {
    parts.push(h('ul', {}, p.errors.map((e) => h('li', {}, e.pointer || e.parameter ? `${e.pointer || e.parameter}: ${e.detail}` : e.detail))));
  }
  return parts;
}

function problemBox(p, what) {
  const box = h('div', { class: 'problem', role: 'alert' }, problemParts(p));
  if (what) box.prepend(h('span', {}, what, ' failed. '));
  return box;
}

/**
 * Shows problem p in the banner, or hides it (p null): said as a problem's box says it, its
 * title and what to do, not "Error:".
 */
function banner(p) {
  const b = document.getElementById('banner');
  // A key refused before it was sent is the banner's one error of a field (setupKey): another
  // problem, or none, takes its place there.
  fieldError(document.getElementById('key-input'), '');
  if (!p) { b.hidden = true; put(b, ); return; }
  put(b, problemParts(p instanceof Problem ? p : new Problem(0, { title: 'Dashboard error', detail: String(p) }), { id: 'banner-detail' }),
    // The button goes with the banner: the focus it had goes on to the page, not to the body.
    h('button', { type: 'button', onclick: () => { banner(null); document.getElementById('view').focus({ preventScroll: true }); } }, 'Dismiss'));
  b.hidden = false;
}

// ---------- formatting ----------

const nf = new Intl.NumberFormat('en-US');
// NBSP joins a figure to its unit or word ("30 d", "1.00 GiB", "100,000 items",
// "< 0.0001%"): a narrow screen would otherwise wrap a line between them and
// leave "d" alone.
const NBSP = '\u00a0';
function num(n) { return n === undefined || n === null ? '–' : nf.format(n); }
function bytes(n) {
  if (n === undefined || n === null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0; let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 2 : 1)}${NBSP}${units[i]}`;
}
// pct shows a share to digits decimals (by default more, the smaller it is).
// A nonzero share too small for them gets two significant digits instead:
// 0% would say there is none.
function pct(x, digits) {
  if (x === undefined || x === null || Number.isNaN(x)) return '–';
  const v = x * 100;
  if (v > 0 && v < 0.0001) return `<${NBSP}0.0001%`;
  let d = digits ?? (v === 0 ? 0 : v < 0.01 ? 4 : v < 1 ? 3 : v < 10 ? 2 : 1);
  if (v > 0 && Number(v.toFixed(d)) === 0) d = 1 - Math.floor(Math.log10(v));
  // Nor does a share short of the whole read 100% (a hit ratio of 99.96%).
  if (v < 100 && Number(v.toFixed(d)) === 100) d = 1 - Math.floor(Math.log10(100 - v));
  // Number drops the trailing zeros of the decimals only (10 stays 10).
  return `${Number(v.toFixed(d))}%`;
}
// count is n with its noun: "1 miss", "2 misses".
function count(n, one, many = `${one}s`) { return `${num(n)}${NBSP}${n === 1 ? one : many}`; }
function rate(x) { return x === null || x === undefined ? '–' : x >= 100 ? nf.format(Math.round(x)) : x.toFixed(1); }
function duration(sec) {
  if (!sec) return `0${NBSP}s`;
  if (sec < 1) return `${Math.round(sec * 1000)}${NBSP}ms`;
  if (sec < 120) return `${sec.toFixed(sec < 10 ? 1 : 0)}${NBSP}s`;
  if (sec < 7200) return `${Math.round(sec / 60)}${NBSP}min`;
  if (sec < 172800) return `${Math.round(sec / 3600)}${NBSP}h`;
  return `${Math.round(sec / 86400)}${NBSP}d`;
}
// toMinute shows no seconds: a user's first and last recordings are kept
// to the minute, and 6:36:00 PM would claim a precision they do not have.
const toMinute = { year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: '2-digit' };
function when(iso, opts) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime()) || d.getTime() <= 0) return '–';
  const ago = (Date.now() - d.getTime()) / 1000;
  // A time kept to the minute is the start of the minute it fell in, up to a minute before it:
  // seconds since then would claim a precision it does not have (and overstate how long ago).
  if (opts === toMinute && ago >= 0 && ago < 120) return `${d.toLocaleString(undefined, opts)} (under ${ago < 60 ? 'a minute' : `2${NBSP}min`} ago)`;
  return `${d.toLocaleString(undefined, opts)} (${ago >= 0 ? duration(ago) + ' ago' : 'in ' + duration(-ago)})`;
}

// ---------- overview ----------

/** Rates between successive samples: [{t, v}] for the value f(prev, cur, dtSeconds). */
function series(f) {
  const out = [];
  for (let i = 1; i < state.samples.length; i++) {
    const a = state.samples[i - 1]; const b = state.samples[i];
    const dt = (b.t - a.t) / 1000;
    if (dt <= 0) continue;
    const v = f(a.s, b.s, dt);
    if (v !== null && Number.isFinite(v)) out.push({ t: b.t, v });
  }
  return out;
}

function sumCalls(s) { return Object.values(s.calls || {}).reduce((x, y) => x + y, 0); }
// The figures' own route: every open dashboard asks it every 2 s, which would keep an idle
// service's calls above 0. The overview's calls leave it out, saying so; the table of routes
// still counts it.
const STATS_ROUTE = 'GET /v1/stats';
function workCalls(s) { return sumCalls(s) - ((s.calls || {})[STATS_ROUTE] || 0); }
function callsRate(route) {
  return (a, b, dt) => ((route ? (b.calls || {})[route] || 0 : workCalls(b)) - (route ? (a.calls || {})[route] || 0 : workCalls(a))) / dt;
}
function hitRatio(a, b) {
  const hits = b.hits - a.hits; const misses = b.misses - a.misses;
  return hits + misses > 0 ? hits / (hits + misses) : null;
}
/** The share of the one call's candidates that tested seen between two samples (null without candidates). */
function seenShare(a, b) {
  const c = b.candidates - a.candidates;
  return c > 0 ? (b.seen_candidates - a.seen_candidates) / c : null;
}
/** The collector's share of the server's CPU between two samples (null when the server was idle). */
function collectorShare(a, b) {
  const busy = b.collector.busy_cpu_seconds - a.collector.busy_cpu_seconds;
  return busy > 0 ? (b.collector.cpu_seconds - a.collector.cpu_seconds) / busy : null;
}

/** An inline SVG sparkline of points [{t, v}] over the history window, labelled for screen readers. */
function sparkline(points, label, fmt, fixedMax, small) {
  const w = 200; const hgt = 40;
  const now = Date.now();
  const svg = s('svg', { class: small ? 'spark small' : 'spark', viewBox: `0 0 ${w} ${hgt}`, preserveAspectRatio: 'none', role: 'img' });
  if (points.length < 2) {
    svg.setAttribute('aria-label', `${label}: collecting, a trend needs two refreshes`);
    return svg;
  }
  const max = fixedMax ?? Math.max(...points.map((p) => p.v), 1e-9);
  // The x axis spans the history there is (at least 10 s), up to HISTORY_MS.
  const span = Math.min(HISTORY_MS, Math.max(now - points[0].t, 10000));
  const x = (t) => ((t - (now - span)) / span) * w;
  const y = (v) => hgt - 2 - (Math.max(0, v) / max) * (hgt - 4);
  const pts = points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
  svg.append(s('polygon', { class: 'area', points: `${x(points[0].t).toFixed(1)},${hgt} ${pts} ${x(points[points.length - 1].t).toFixed(1)},${hgt}` }));
  svg.append(s('polyline', { points: pts }));
  const vs = points.map((p) => p.v);
  svg.setAttribute('aria-label', `${label} over the last ${Math.round((now - points[0].t) / 60000) || 1} min: now ${fmt(vs[vs.length - 1])}, min ${fmt(Math.min(...vs))}, max ${fmt(Math.max(...vs))}`);
  const title = s('title'); title.textContent = svg.getAttribute('aria-label'); svg.prepend(title);
  return svg;
}

function card(id, label, value, sub, extra) {
  return h('div', { class: 'card', id: `card-${id}` },
    h('dl', {}, h('dt', {}, label), h('dd', {}, h('span', { class: 'value', 'data-k': id }, value), sub ? h('span', { class: 'sub' }, sub) : null)),
    extra || null);
}

function renderOverview(view) {
  put(view, 
    h('h2', {}, VIEW_TITLES.overview),
    h('div', { id: 'overview-error' }),
    h('div', { id: 'overview', 'aria-live': 'off' }, h('p', { class: 'muted' }, 'Loading figures…')));
  drawOverview();
}

/**
 * Replaces box's children as put does, keeping what the reader did there: how far each wide
 * table was scrolled sideways, and the focus, given to the element at the same place. The
 * overview is drawn anew every 2 s, which would otherwise take both away each time.
 */
function redraw(box, ...children) {
  const scrolled = new Map([...box.querySelectorAll('.wide')].map((w) => [w.getAttribute('aria-label'), w.scrollLeft]));
  const path = []; // child indexes from box down to the focused element
  for (let el = document.activeElement; el && el !== box && box.contains(el); el = el.parentElement) {
    path.unshift([...el.parentElement.children].indexOf(el));
  }
  put(box, ...children);
  for (const w of box.querySelectorAll('.wide')) w.scrollLeft = scrolled.get(w.getAttribute('aria-label')) || 0;
  let el = path.length ? box : null;
  for (const i of path) el = el && el.children[i];
  if (el) el.focus({ preventScroll: true });
}

function drawOverview() {
  const box = document.getElementById('overview');
  if (!box) return;
  const errBox = document.getElementById('overview-error');
  // The same problem again at the next refresh stays the box it was: an alert drawn anew would
  // be read out again every refresh, for as long as the service is down.
  const problem = state.statsError ? `${state.statsError.status} ${state.statsError.title} ${state.statsError.detail || state.statsError.message}` : '';
  if (errBox.dataset.problem !== problem) {
    put(errBox, state.statsError ? problemBox(state.statsError, 'Refreshing the figures') : '');
    errBox.dataset.problem = problem;
  }
  const last = state.samples[state.samples.length - 1];
  if (!last) {
    if (state.statsError) put(box, );
    return;
  }
  const st = last.s;
  const calls = series(callsRate(null));
  const hits = series(hitRatio);
  const seen = series(seenShare);
  // No share of nothing: before the first lookup or candidate a ratio is '–', as by namespace, not 0%.
  const seenSinceStart = st.candidates > 0 ? st.seen_candidates / st.candidates : null;
  const hitsSinceStart = st.hits + st.misses > 0 ? st.hit_ratio : null;
  const degraded = series((a, b, dt) => (b.degraded - a.degraded) / dt);
  const gc = series(collectorShare);
  const col = st.collector;
  const gcSinceStart = col.busy_cpu_seconds > 0 ? col.cpu_seconds / col.busy_cpu_seconds : 0;
  const lastRate = (pts) => (pts.length ? pts[pts.length - 1].v : null);
  const usedFrac = st.cache_budget_bytes > 0 ? st.cache_bytes / st.cache_budget_bytes : 0;
  const totalCalls = workCalls(st);
  // The service counts the request asking for the figures among those it is serving, and
  // maybe other calls of the page's sent beside it (the page's first calls go together).
  const inFlight = Math.max(0, st.in_flight - last.own);

  const cards = h('div', { class: 'cards' },
    card('calls', 'Calls per second', rate(lastRate(calls)), `${count(totalCalls, 'call')} since start, besides ${STATS_ROUTE} (the dashboards' own) · ${num(inFlight)}${NBSP}in flight besides this page's`,
      sparkline(calls, 'Calls per second', rate)),
    card('hit-ratio', 'Cache hit ratio', hits.length ? pct(lastRate(hits), 1) : pct(hitsSinceStart, 1),
      `${pct(hitsSinceStart, 1)} since start · ${count(st.hits, 'hit')}, ${count(st.misses, 'miss', 'misses')}` +
      // A call for a user with no history (a new user's first) is no miss: no cache could have held it.
      (st.no_history_calls ? ` · ${count(st.no_history_calls, 'call for a user with no history', 'calls for users with no history')}, not counted` : ''),
      sparkline(hits, 'Hit ratio', (v) => pct(v, 1), 1)),
    card('seen', 'Candidates already seen', seen.length ? pct(lastRate(seen), 1) : pct(seenSinceStart, 1),
      `${pct(seenSinceStart, 1)} since start · ${count(st.candidates, 'candidate')} · ${count(st.recorded, 'item')} recorded`,
      sparkline(seen, 'Share of candidates already seen', (v) => pct(v, 1), 1)),
    card('hot-users', 'Hot users', num(st.hot_users), `${count(st.loads, 'storage read')} (${count(st.new_users, 'new user')}) · ${num(st.evictions)}${NBSP}evicted`),
    card('cache', 'Cache bytes', bytes(st.cache_bytes), `of ${bytes(st.cache_budget_bytes)} budget (${pct(usedFrac, 1)})`,
      h('div', { class: `bar${usedFrac > 0.9 ? ' warn' : ''}`, role: 'img', 'aria-label': `cache ${pct(usedFrac, 1)} of budget` },
        h('span', { style: `width:${Math.min(100, usedFrac * 100).toFixed(1)}%` }))),
    card('dirty', 'Dirty users', num(st.dirty_users), `flush lag ${duration(st.flush_lag_ns / 1e9)} · ${num(st.flushed_users)}${NBSP}written back`),
    card('degraded', 'Degraded answers', num(st.degraded), `fail-open answers · ${rate(lastRate(degraded))}/s now · ` +
      // Retries a kept answer served (Idempotency-Key): a client timing out shows here first.
      `${count(st.idempotent_replays, 'retry', 'retries')} answered again`),
    card('collector', 'Collector share of CPU', gc.length ? pct(lastRate(gc), 1) : pct(gcSinceStart, 1),
      `${pct(gcSinceStart, 1)} since start · ${count(col.cycles, 'collection')} · heap ${bytes(col.heap_live_bytes)} live, next at ${bytes(col.heap_goal_bytes)}`,
      sparkline(gc, 'Collector share of CPU', (v) => pct(v, 1), 1)),
    card('storage', 'Storage size', bytes(st.storage_bytes), `${count(st.storage_errors, 'storage error')} · ${count(st.journal_appends, 'journal append')}` +
      // Level 0 fills at each memtable flush until a compaction empties it.
      (st.storage_levels && st.storage_levels.length ? ` · ${count(st.storage_levels[0].tables, 'table')} in level 0` : '')),
    card('uptime', 'Uptime', duration(st.uptime_seconds), `since ${when(st.started_at)}`));

  const allRoutes = Object.keys(st.calls || {});
  const routes = allRoutes.filter((r) => st.calls[r] > 0).sort((a, b) => (st.calls[b] - st.calls[a]) || a.localeCompare(b));
  const idle = allRoutes.length - routes.length;
  const routeTable = h('table', { id: 'routes' },
    h('caption', {}, 'Calls per route'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Route'), h('th', { scope: 'col', class: 'num' }, 'Calls/s'),
      h('th', { scope: 'col', class: 'num' }, 'Total'), h('th', { scope: 'col' }, `Last 5${NBSP}min`))),
    h('tbody', {}, routes.length ? routes.map((r) => {
      const pts = series(callsRate(r));
      return h('tr', {}, h('td', {}, h('code', {}, r)), h('td', { class: 'num' }, rate(lastRate(pts))),
        h('td', { class: 'num' }, num(st.calls[r])), h('td', { class: 'spark-cell' }, sparkline(pts, `${r} calls per second`, rate, undefined, true)));
    }) : h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'No calls yet.'))),
    idle ? h('tfoot', {}, h('tr', {}, h('td', { colspan: 4, class: 'muted' }, `${count(idle, 'other route')} without calls.`))) : null);

  // Which namespace fills the budget, and which one misses.
  const nsStats = st.namespaces || {};
  const names = Object.keys(nsStats).sort((a, b) => (nsStats[b].cache_bytes - nsStats[a].cache_bytes) || a.localeCompare(b));
  const nsTable = h('table', { id: 'ns-stats' },
    h('caption', {}, 'By namespace'),
    h('thead', {}, h('tr', {}, ['Namespace', 'Hot users', 'Cache bytes', 'Share of budget', 'Hit ratio', 'Storage reads', 'Evicted', 'Candidates already seen', 'Items recorded']
      .map((c, i) => h('th', { scope: 'col', class: i ? 'num' : null }, c)))),
    h('tbody', {}, names.length ? names.map((name) => {
      const n = nsStats[name];
      const share = st.cache_budget_bytes > 0 ? n.cache_bytes / st.cache_budget_bytes : 0;
      // A namespace a reload took out keeps its figures, but has no users to list.
      const removed = (st.removed_namespaces || []).includes(name);
      return h('tr', { 'data-ns': name },
        h('th', { scope: 'row' }, removed ? [name, h('span', { class: 'muted' }, ' (no longer served)')]
          : h('a', { href: `#/ns/${encodeURIComponent(name)}` }, name)),
        h('td', { class: 'num' }, num(n.hot_users)), h('td', { class: 'num' }, bytes(n.cache_bytes)),
        h('td', { class: 'num' }, pct(share, 1)),
        h('td', { class: 'num' }, n.hits + n.misses > 0 ? pct(n.hit_ratio, 1) : '–'),
        h('td', { class: 'num' }, `${num(n.loads)} (${count(n.new_users, 'new user')})`),
        h('td', { class: 'num' }, num(n.evictions)),
        h('td', { class: 'num' }, n.candidates > 0 ? `${pct(n.seen_candidates / n.candidates, 1)} of ${num(n.candidates)}` : '–'),
        h('td', { class: 'num' }, num(n.recorded)));
    }) : h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No namespaces configured.'))));

  const statuses = Object.keys(st.errors || {}).sort();
  const errTable = h('table', { id: 'errors' },
    h('caption', {}, 'Error answers by status'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col', class: 'num' }, 'Answers'))),
    h('tbody', {}, statuses.length ? statuses.map((c) => h('tr', {}, h('td', {}, c), h('td', { class: 'num' }, num(st.errors[c]))))
      : h('tr', {}, h('td', { colspan: 2, class: 'muted' }, 'None.'))),
    h('tfoot', {}, h('tr', { id: 'panics', class: st.panics ? 'bad' : '' },
      h('td', { colspan: 2, class: st.panics ? '' : 'muted' },
        `${count(st.panics, 'panic')} recovered${st.panics ? ' (bugs: the log has each stack)' : ''}`)),
    // A user with no history answered 404 user-not-found (a look-up here among them): no fault,
    // so the service counts it apart from the errors above.
    st.users_not_found ? h('tr', { id: 'users-not-found' }, h('td', { colspan: 2, class: 'muted' },
      `${count(st.users_not_found, 'look-up')} of a user with no history (404 user-not-found), not errors`)) : null,
    // /readyz's 503 while the service starts or drains is the probe working as designed, counted apart too.
    st.not_ready ? h('tr', { id: 'not-ready' }, h('td', { colspan: 2, class: 'muted' },
      `${count(st.not_ready, 'answer')} of /readyz 503 not ready (starting or draining), not errors`)) : null));

  // A key limited to some namespaces gets their share of the figures by namespace, and the
  // service's whole totals (GET /v1/stats): its cards are not its namespaces' sums.
  const r = state.role;
  const scope = r.status === 'known' && r.namespaces ? h('p', { class: 'muted', id: 'overview-scope' },
    `This key may call ${scopeWords(r.namespaces)}: the table by namespace shows ` +
    `${r.namespaces.length === 1 ? 'its' : 'their'} figures, the cards and the other tables the whole service's.`) : null;

  redraw(box, scope, cards, wide('By namespace', nsTable),
    h('div', { class: 'row' }, h('div', { style: 'flex: 3 1 30rem' }, wide('Calls per route', routeTable)), h('div', {}, wide('Error answers by status', errTable))));
}

/**
 * The footer: how fresh the overview's figures are (text, when given). It stays on every page,
 * where it says whose figures they are: a user's page, read once, would seem to refresh too.
 */
function showUpdated(text) {
  if (text !== undefined) state.updated = text;
  document.getElementById('updated').textContent = state.updated && state.view !== 'overview'
    ? `${state.updated} · the overview's figures, not this page's` : state.updated;
}

async function poll() {
  clearTimeout(state.timer);
  if (!document.hidden) {
    try {
      const beside = { n: 0 };
      const st = await call('getStats', {}, undefined, { beside });
      const now = Date.now();
      const prev = state.samples[state.samples.length - 1];
      // A restarted service starts its counters again: its old history no longer subtracts.
      if (prev && (st.started_at !== prev.s.started_at || sumCalls(st) < sumCalls(prev.s))) state.samples = [];
      state.samples.push({ t: now, s: st, own: 1 + beside.n });
      while (state.samples.length && state.samples[0].t < now - HISTORY_MS) state.samples.shift();
      state.statsError = null;
      showUpdated(`Figures updated ${new Date(now).toLocaleTimeString()} · refresh every ${REFRESH_MS / 1000}${NBSP}s`);
    } catch (e) {
      state.statsError = e;
      // The figures still shown are those of the last answer: say how old they are.
      const last = state.samples[state.samples.length - 1];
      showUpdated((last ? `Figures of ${new Date(last.t).toLocaleTimeString()}, not refreshed since: ` : 'Figures not refreshed: ') +
        (e.detail || e.message) + (e.needsKey ? ' (asked again once a key is entered)' : ''));
      // Without a key the service takes, asking again every 2 s would only add to its count
      // of 401 answers, which its operators may watch: the figures wait for a key (resetRole).
      if (e.needsKey) {
        if (state.view === 'overview') drawOverview();
        return;
      }
    }
    if (state.view === 'overview') drawOverview();
  }
  state.timer = setTimeout(poll, REFRESH_MS);
}

// ---------- namespaces ----------

async function loadNamespaces() {
  const doc = await call('listNamespaces');
  state.namespaces = doc.namespaces || [];
  state.notServed = doc.not_served || [];
  return state.namespaces;
}

/**
 * A configured span in seconds, exact and in the units of the namespaces file and of seenapi
 * check (userfilter.FormatDuration): days from a day up when whole to two decimals ("30 d",
 * "7.5 d", "1.75 d", a 7 d window's default buckets), else whole hours or minutes ("25 h",
 * "90 min"); 0 is "none".
 */
function seconds(sec) {
  if (!sec) return 'none';
  if (sec >= 86400 && (sec * 100) % 86400 === 0) return `${sec / 86400}${NBSP}d`;
  if (sec % 3600 === 0) return `${sec / 3600}${NBSP}h`;
  if (sec % 60 === 0) return `${sec / 60}${NBSP}min`;
  return `${sec}${NBSP}s`;
}

/**
 * Draws the Namespaces page; done, the outcome of an erasure of a namespace's data, is shown
 * below its heading (and read out by announce, as every action's outcome).
 */
async function renderNamespaces(view, seq, done) {
  const top = () => [h('h2', { id: 'namespaces-h', tabindex: -1 }, VIEW_TITLES.namespaces), done ? h('p', { class: 'done', id: 'purge-done' }, done) : null];
  put(view, top(), h('p', { class: 'muted' }, 'Loading…'));
  let list;
  try { list = await loadNamespaces(); } catch (e) {
    if (seq !== state.seq) return;
    put(view, top(), problemBox(e, 'Listing the namespaces'));
    return;
  }
  if (seq !== state.seq) return;
  put(view, top(),
    h('p', { class: 'muted' }, 'Each namespace is one kind of seen history with its own filter profile. A profile is stored with each user\'s filter, so changing it only affects new filters.'),
    // A table is announced by its name: the overview's have captions, the others their heading.
    wide('Namespaces', h('table', { id: 'namespaces', 'aria-labelledby': 'namespaces-h' },
      h('thead', {}, h('tr', {}, ['Name', 'Kind', 'Target FP rate', 'Window', 'Granularity', 'Item cap', 'Initial capacity', 'Growth', 'Tightening']
        .map((c, i) => h('th', { scope: 'col', class: i >= 2 && i !== 3 && i !== 4 ? 'num' : null }, c)))),
      h('tbody', {}, list.length ? list.map((n) => h('tr', { 'data-ns': n.name },
        h('th', { scope: 'row' }, h('a', { href: `#/ns/${encodeURIComponent(n.name)}` }, n.name)),
        h('td', {}, n.kind), h('td', { class: 'num' }, pct(n.fp_rate)), h('td', {}, seconds(n.window)),
        h('td', {}, seconds(n.granularity)), h('td', { class: 'num' }, n.max_items ? num(n.max_items) : 'no cap'),
        h('td', { class: 'num' }, num(n.initial_capacity)), h('td', { class: 'num' }, `×${n.growth}`),
        h('td', { class: 'num' }, `×${n.tightening}`)))
        : h('tr', {}, h('td', { colspan: 9 }, 'No namespaces configured.'))))),
    state.notServed.length ? notServedPanel(state.notServed, async (outcome) => {
      // The view drawn again took the button that had the focus: the page's heading takes it,
      // with the outcome just below. The outcome is read out once, through #announce; a live
      // region of its own, new to the page, would not be (or read twice with the focus on it).
      await renderNamespaces(view, ++state.seq, outcome);
      announce(outcome);
      const heading = document.getElementById('namespaces-h');
      if (heading) heading.focus();
    }) : null);
}

/**
 * The box an action's outcome is shown in. It is no live region: a user's page is drawn anew
 * after a change, this box with it, and a region new to the page is not read out; the
 * outcome is read out by announce, a problem as an alert (problemBox).
 */
function resultBox(id) { return h('div', { id: `${id}-result` }); }

/**
 * Reads text out to a screen reader through #announce, a status region in the page from its
 * start, never redrawn. The same text twice in a row is read twice: the region is emptied
 * first, and filled once the reader has seen it empty.
 */
function announce(text) {
  const el = document.getElementById('announce');
  el.textContent = '';
  clearTimeout(announce.timer);
  announce.timer = setTimeout(() => { el.textContent = text; }, 50);
}

/** Shows the paragraph of an action done, text, in box, followed by rest, and reads it out. */
function showDone(box, text, ...rest) {
  const p = h('p', { class: 'done' }, text);
  put(box, p, ...rest);
  announce(p.textContent);
}

/** An action's button, with the role it needs said beside it when the key lacks it (see gate). */
function actionRow(button) { return h('div', { class: 'actions' }, button, h('span', { class: 'need muted' })); }

/**
 * Runs work with button disabled, so that a second click does not send it again, then gives
 * the button back to its role's gate, and the focus back to what had it if the focus was lost
 * meanwhile: a disabled button loses it, and a user's page drawn again after a change replaces
 * the button and its items box (by the ones of their ids), which would leave a keyboard at the
 * top of the page.
 */
async function whileBusy(button, work) {
  const had = document.activeElement;
  button.disabled = true;
  try { await work(); } finally {
    button.disabled = false;
    gate(button);
    const lost = !document.activeElement || document.activeElement === document.body;
    const now = had && (had.isConnected ? had : had.id && document.getElementById(had.id));
    if (lost && now && now !== document.body) now.focus();
  }
}

/**
 * Whether the focus is where the page put it, on the page's content (the view, given it by each
 * change of address) or nowhere (the body), rather than on what the user is using.
 */
function focusIsFree() {
  const el = document.activeElement;
  return !el || el === document.body || el.id === 'view';
}

/**
 * A modal dialog asking to confirm an erasure, which cannot be undone: its Cancel has the
 * focus first, so that Enter or Escape cancels; erase runs once it has closed.
 */
function eraseDialog(id, title, body, erase) {
  const confirmBtn = h('button', { type: 'button', id: `${id}-confirm`, class: 'danger' }, 'Erase');
  const cancel = h('button', { type: 'button', id: `${id}-cancel`, class: 'quiet', autofocus: true }, 'Cancel');
  const dialog = h('dialog', { id: `${id}-dialog`, 'aria-labelledby': `${id}-dh`, 'aria-describedby': `${id}-dd` },
    h('h3', { id: `${id}-dh` }, title), h('p', { id: `${id}-dd` }, body), h('div', { class: 'actions' }, cancel, confirmBtn));
  cancel.addEventListener('click', () => dialog.close());
  confirmBtn.addEventListener('click', () => { dialog.close(); erase(); });
  return dialog;
}

/** A panel of one of a user's actions: its title, what it does, its button, then rest. */
function buttonPanel(id, title, text, button, ...rest) {
  return h('section', { class: 'panel', 'aria-labelledby': `${id}-h` },
    h(USER_PANEL, { id: `${id}-h` }, title), h('p', { class: 'muted' }, text), actionRow(button), ...rest);
}

/**
 * The namespaces whose users are stored but that are not served (taken out of the namespaces
 * file), each with a button that erases its data after a confirmation; reload(message) draws
 * the view again with what was done.
 */
function notServedPanel(names, reload) {
  const result = resultBox('purge');
  const what = h('code', {});
  let chosen = null;
  const dialog = eraseDialog('purge', 'Erase this namespace\'s data?',
    ['Every user of ', what, ' will be erased from the journal and disk. Served again, the namespace starts empty. This cannot be undone.'],
    async () => {
      const ns = chosen;
      // The service erases about a million users in 3.5 s, and finishes even if the page stops waiting.
      put(result, h('p', { class: 'muted' }, `Erasing the data of ${ns}…`));
      try {
        const r = await call('purgeNamespace', { ns }, undefined, { answerMs: PURGE_ANSWER_MS });
        await reload(`Erased the data of ${ns}: ${count(r.users_erased, 'user')}.`);
      } catch (e) {
        put(result, problemBox(e, `Erasing ${ns}`));
      }
    });
  const rows = names.map((name) => {
    const open = h('button', { type: 'button', class: 'danger', 'data-op': 'purgeNamespace' }, 'Erase data…');
    open.addEventListener('click', () => { chosen = name; what.textContent = name; put(result); dialog.showModal(); });
    return h('tr', { 'data-ns': name }, h('th', { scope: 'row' }, name),
      h('td', {}, actionRow(open)));
  });
  for (const tr of rows) gate(tr.querySelector('button'));
  return h('section', { class: 'panel', 'aria-labelledby': 'not-served-h' },
    h('h3', { id: 'not-served-h' }, 'Stored, not served'),
    h('p', { class: 'muted' }, 'These namespaces were taken out of the namespaces file, but their users are still on disk: put a namespace back to serve them as they were, or erase its data.'),
    h('table', { id: 'not-served', 'aria-labelledby': 'not-served-h' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Namespace'), h('th', { scope: 'col' }, 'Data'))),
      h('tbody', {}, rows)),
    dialog, result);
}

// ---------- user inspector ----------

// A user's page is outlined h2 User inspector > h3 the user > h4 each panel of the user > h5 a
// part of a panel: a screen reader's list of headings then shows the panels as the user's, not
// as siblings of its title.
const USER_PANEL = 'h4';
const USER_PART = 'h5';

function userHash(ns, user) { return `#/ns/${encodeURIComponent(ns)}/users/${encodeURIComponent(user)}`; }

// One item a line: an item id may hold a comma, so commas do not separate. A line is the
// item as typed: the service takes spaces at an item's ends, so " a" is an item apart from "a"
// (trimmed, a check would answer for another item, and a record would mark it), and a line of
// spaces alone before another item is an item too, which the service takes as any other. Empty
// lines only separate: the service refuses an empty item. Lines of spaces alone after the last
// item are what a paste or an editor leaves at its end, not items: they are counted in dropped
// and said so (skipped), never recorded.
function parseItems(text) {
  const lines = text.split('\n');
  let end = lines.length;
  while (end > 0 && !lines[end - 1].trim()) end--;
  return { items: lines.slice(0, end).filter((x) => x.length > 0), dropped: lines.slice(end).filter((x) => x.length > 0).length };
}

/** What is said of the lines of spaces alone after the last item, which are not sent. */
function skipped(dropped) {
  return `${count(dropped, 'line')} of spaces alone after the last item ${dropped === 1 ? 'was' : 'were'} not sent.`;
}

/**
 * An item as the results show it: its text, and for one of spaces alone, which shows as
 * nothing, how many spaces it is.
 */
function itemText(it) {
  return [h('code', {}, it), it.trim() ? null : h('span', { class: 'muted' }, ` (${count(it.length, 'space')})`)];
}

// The ids of the refusals of a user id in the page's address, an error of the user id's field.
const ADDRESS_ERRORS = ['user-too-long', 'user-unusable'];

async function renderInspector(view, seq, ns, user) {
  const nsSelect = h('select', { id: 'lookup-ns', name: 'ns', required: true });
  const userInput = h('input', { id: 'lookup-user', name: 'user', type: 'text', required: true, spellcheck: 'false', value: user || '', placeholder: 'e.g. 42' });
  // novalidate: the browser's own check of the required field would stop an empty look-up
  // before the page's, which says so tied to the field as the page's other errors of a field.
  const form = h('form', { class: 'form', id: 'lookup', role: 'search', 'aria-label': 'Look up a user', novalidate: true },
    h('div', {}, h('label', { for: 'lookup-ns' }, 'Namespace'), nsSelect),
    h('div', {}, h('label', { for: 'lookup-user' }, 'User id'), userInput),
    h('div', {}, h('button', { type: 'submit' }, 'Look up')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    // The id as typed: the service takes spaces at its ends, so " 42" is a user apart from "42",
    // and an id of spaces alone as any other.
    const u = userInput.value;
    if (!u) { refuseTyped('lookup-empty', 'Enter a user id.'); return; }
    if (userTooLong(u)) { refuseTyped('lookup-too-long', userTooLong(u)); return; }
    const target = userHash(nsSelect.value, u);
    if (location.hash !== target) { location.hash = target; return; }
    // The same user again: no hashchange gives the focus to the page drawn anew, which takes the
    // field and the button that had it, so it goes there as after any other look-up.
    document.getElementById('view').focus({ preventScroll: true });
    route();
  });
  // An id typed that the page refuses unsent: not a silent refusal, nor the browser's bubble (which
  // a screen reader back in the field does not hear), but an alert in the page tied to the field,
  // drawn anew at each try so that it is read out again, until the field is changed.
  const typedErrors = ['lookup-empty', 'lookup-too-long'];
  const clearTyped = () => typedErrors.forEach((id) => document.getElementById(id)?.remove());
  const refuseTyped = (id, text) => {
    // The field's message replaces its earlier one, the refusal of the address's id (below)
    // too: the same id looked up again would otherwise show, and read out, its refusal twice.
    [...typedErrors, ...ADDRESS_ERRORS].forEach((e) => document.getElementById(e)?.remove());
    out.prepend(h('p', { class: 'problem', id, role: 'alert' }, text));
    fieldError(userInput, id);
    userInput.focus();
  };
  userInput.addEventListener('input', () => { fieldError(userInput, ''); clearTyped(); });
  const out = h('div', { id: 'user' });
  put(view, h('h2', {}, VIEW_TITLES.users), form, out);

  // A key limited to some namespaces (GET /v1/auth's namespaces) is refused the others: one
  // named by the address is said so, and not offered in the select as if it could be called.
  // The check may take a while on a slow service: the page says it is loading meanwhile.
  if (state.role.status === 'checking') {
    put(out, h('p', { class: 'muted' }, 'Loading…'));
    await state.roleCheck;
    put(out);
  }
  if (seq !== state.seq) return;
  const r = state.role;
  const barred = ns && r.status === 'known' && r.namespaces && !r.namespaces.includes(ns) ? ns : '';
  if (barred) {
    out.append(h('p', { class: 'problem', id: 'ns-barred', role: 'alert' }, 'This key cannot call namespace ', h('code', {}, barred),
      `: it may call ${scopeWords(r.namespaces)}. ` +
      'Enter a key for it in the bar at the top, or choose one of those.'));
    ns = '';
    user = ''; // not looked up there (a 403); the field keeps the id for another namespace
  }

  const fill = (names) => {
    const all = [...names];
    if (ns && !all.includes(ns)) all.unshift(ns);
    const chosen = nsSelect.value || ns || 'default'; // a refill keeps what the user chose meanwhile
    put(nsSelect, ...all.map((n) => h('option', { value: n, selected: n === chosen }, n)));
  };
  // Before the listing answers, a guess: the address's namespace, else the key's own (one
  // limited to others is refused default's users, each refusal a 403 in the service's errors).
  fill(state.namespaces ? state.namespaces.map((n) => n.name) : ns ? [ns] : (r.status === 'known' && r.namespaces) || ['default']);
  // Asked again each time: a SIGHUP may have added a namespace since the page loaded.
  loadNamespaces()
    .then((list) => {
      if (seq !== state.seq) return;
      const before = nsSelect.value;
      fill(list.map((n) => n.name));
      // A namespace guessed before the list came and not in it (one a SIGHUP took out): the
      // select now shows another, whose users the list below must follow.
      if (nsSelect.value !== before) nsSelect.dispatchEvent(new Event('change'));
    })
    .catch(() => { /* the list is a convenience; the lookup itself reports errors */ });

  if (!ns || !user) {
    out.append(h('p', { class: 'muted' }, 'Choose a namespace and a user id, or a user below. The page address then links to this user, for a ticket.'));
    // The list follows the namespace chosen; a late page of the one before is dropped.
    let list = userList(seq, nsSelect.value || ns || 'default');
    out.append(list);
    nsSelect.addEventListener('change', () => { const next = userList(seq, nsSelect.value); list.replaceWith(next); list = next; });
    // The field takes the focus only where nothing had it: the role's check may answer while a
    // key (or anything else) is being typed, whose last keys would then go into this field.
    if (!user && focusIsFree()) userInput.focus();
    return;
  }
  document.title = `${isolated(user)} in ${ns} · seenapi`;
  // An id the service would refuse, for its length or as a path's step, is refused unsent, an
  // error of the field holding it.
  const unusable = unusableId('user', user);
  const refused = userTooLong(user) ? h('p', { class: 'problem', id: ADDRESS_ERRORS[0], role: 'alert' }, userTooLong(user))
    : unusable ? Object.assign(problemBox(unusable, ['Looking up user ', h('bdi', {}, user), ` in ${ns}`]), { id: ADDRESS_ERRORS[1] }) : null;
  if (refused) {
    out.append(refused);
    fieldError(userInput, refused.id);
    return;
  }
  // The focus went to the page as the look-up started, when it said "Loading…": what was found is
  // read out once it is drawn (a problem is an alert of its own).
  const found = await drawUser(out, seq, ns, user);
  if (found && seq === state.seq) announce(found);
}

const USERS_PAGE = 50;

/**
 * What an id's spaces at its ends are, which do not show in it, or '' when it has none: a
 * pasted id may carry one unseen, and an id of spaces alone shows as nothing.
 */
function spaceNote(id) {
  if (!/^\s|\s$/.test(id)) return '';
  if (!id.trim()) return `is ${count(id.length, 'space')} alone`;
  return /^\s/.test(id) ? 'begins with a space' : 'ends with a space';
}

/** One row of the user list: the user's link and its summary (or the error its filter met). */
function userRow(ns, u, d) {
  // The link's text holds the note of its spaces: an id of spaces alone would be a link of nothing.
  const link = h('td', {}, h('a', { href: userHash(ns, u) }, h('bdi', {}, u), spaceNote(u) ? h('span', { class: 'muted' }, ` (the id ${spaceNote(u)})`) : null));
  if (!d) return h('tr', {}, link, h('td', { colspan: 4, class: 'muted' }, 'Forgotten since it was listed.'));
  if (d.error) return h('tr', { class: 'failed' }, link, h('td', { colspan: 4 }, `${d.error.title}: ${d.error.detail}`));
  return h('tr', {}, link, h('td', { class: 'num' }, num(d.items)), h('td', { class: 'time' }, when(d.last_seen, toMinute)),
    h('td', { class: 'num' }, bytes(d.memory_bytes)), h('td', {}, d.hot ? 'yes' : 'no'));
}

/**
 * The users of ns with a history, a page at a time in id order, each linking to its page,
 * with its items, last recording, memory and whether it is in memory (?details=true: the
 * service reads cold users from the store without bringing them into memory).
 */
function userList(seq, ns) {
  const rows = h('tbody', {});
  const list = h('table', { class: 'user-list', id: 'user-list', 'aria-labelledby': 'user-list-title' },
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'User'), h('th', { scope: 'col', class: 'num' }, 'Items'),
      h('th', { scope: 'col' }, 'Last recorded'), h('th', { scope: 'col', class: 'num' }, 'Memory'),
      h('th', { scope: 'col' }, 'In memory'))), rows);
  const note = h('p', { class: 'muted', id: 'user-list-note', 'aria-live': 'polite' }, 'Loading…');
  const more = h('button', { type: 'button', id: 'user-list-more', hidden: true }, 'More users');
  // Its dates and figures are wider than a phone's window: the table scrolls in a box of its own.
  const scroller = wide(`Users in ${ns}`, list);
  const box = h('section', { class: 'panel', 'aria-labelledby': 'user-list-title' },
    h('h3', { id: 'user-list-title' }, 'Users in ', h('code', {}, ns)), note, scroller, more);
  let after = '';
  const load = async () => {
    more.disabled = true;
    let page;
    try {
      page = await call('listUsers', { ns, after, limit: USERS_PAGE, details: true });
    } catch (e) {
      if (seq !== state.seq || !box.isConnected) return;
      note.replaceWith(problemBox(e, `Listing the users of ${ns}`));
      more.hidden = true;
      scroller.hidden = list.hidden = rows.children.length === 0; // no empty table under the problem
      return;
    }
    if (seq !== state.seq || !box.isConnected) return;
    const details = new Map((page.details || []).map((d) => [d.user, d]));
    rows.append(...page.users.map((u) => userRow(ns, u, details.get(u))));
    after = page.next || '';
    more.hidden = !page.next;
    more.disabled = false;
    const n = rows.children.length;
    scroller.hidden = list.hidden = n === 0;
    note.textContent = n ? `${count(n, 'user')} in id order${page.next ? ', more after these' : ''}.`
      : `No user has a history in ${ns} yet: a user appears with its first recorded item.`;
  };
  more.addEventListener('click', async () => {
    const focused = document.activeElement === more;
    const shown = rows.children.length;
    await load();
    // The button lost the focus, disabled meanwhile (or hidden now, after the last page): a
    // keyboard goes on from the first user added.
    const link = rows.children[shown] && rows.children[shown].querySelector('a');
    if (focused && link) link.focus();
  });
  load();
  return box;
}

/**
 * Draws user's page in out, and answers what was found, to be read out (see renderInspector): ''
 * for a problem, itself an alert, or a view no longer shown.
 */
async function drawUser(out, seq, ns, user) {
  // Drawn again after a change, the page keeps what was typed in its boxes of items: a list
  // pasted to check would otherwise be lost to a record made meanwhile.
  const typed = [...out.querySelectorAll('textarea')].map((ta) => [ta.id, ta.value]);
  put(out, h('p', { class: 'muted' }, 'Loading…'));
  // The profile explains the figures (window, cap); the user's own answer decides what is shown.
  const profile = call('getNamespace', { ns }).catch(() => null);
  let stats = null; let missing = null; let corrupt = null;
  try {
    stats = await call('getUser', { ns, user });
  } catch (e) {
    if (seq !== state.seq) return '';
    // A corrupt filter fails its user's every call but the erase, which is its remedy.
    if (e.kind === 'corrupt-filter') corrupt = e;
    else if (e.kind !== 'user-not-found') {
      put(out, problemBox(e, ['Looking up user ', h('bdi', {}, user), ` in ${ns}`]));
      return '';
    } else missing = e;
  }
  const prof = await profile;
  if (seq !== state.seq) return '';
  const reload = () => drawUser(out, seq, ns, user);
  put(out, 
    h('h3', { id: 'user-title' }, 'User ', h('code', {}, user), ' in ', h('code', {}, ns), ' ',
      // Spaces at an id's ends do not show in it: a pasted id may carry one unseen.
      spaceNote(user) ? [h('span', { class: 'muted', id: 'user-space' }, `(the id ${spaceNote(user)})`), ' '] : null,
      stats ? [h('span', { class: `tag ${stats.hot ? 'hot' : 'cold'}`, id: 'user-hot' }, stats.hot ? 'hot' : 'not hot'),
        stats.dirty ? [' ', h('span', { class: 'tag seen' }, 'unwritten changes')] : null,
        stats.saturated ? [' ', h('span', { class: 'tag seen' }, 'at item cap')] : null] : null),
    // The page is read once: its figures are those of then, not followed as the overview's are.
    h('p', { class: 'muted', id: 'user-read-at' }, `As read at ${new Date().toLocaleTimeString()}; look up again for the figures of now.`),
    corrupt ? [problemBox(corrupt, ['Reading the filter of user ', h('bdi', {}, user)]),
      h('p', { class: 'note', id: 'user-corrupt' }, 'Its stored filter cannot be read, so its calls fail (or, with on_error open, are answered unfiltered). ' +
        'Erasing the user lets it start afresh, with every item unseen again.')]
      : missing ? h('p', { class: 'note', id: 'user-missing' }, 'No history: user ', h('bdi', {}, user), ` has seen nothing in ${ns} (${missing.detail || 'not found'}).`) : null,
    stats ? h('div', { class: 'row' }, summaryPanel(stats, prof), layersPanel(stats)) : null,
    h('div', { class: 'row' }, corrupt ? null : [checkPanel(ns, user), recordPanel(ns, user, reload, !!(stats ? stats.window : prof && prof.window)),
      // Only a compact filter can forget items; the user's own kind decides, else the namespace's.
      (stats ? stats.kind : prof && prof.kind) === 'compact' ? forgetPanel(ns, user, reload) : null],
    stats ? exportPanel(ns, user) : null,
    erasePanel(ns, user, reload)));
  for (const [id, value] of typed) {
    const ta = document.getElementById(id);
    if (ta && out.contains(ta)) ta.value = value;
  }
  showRole();
  if (stats) return `User ${isolated(user)} in ${ns}: ${count(stats.items, 'item')} recorded.`;
  return missing ? `No history: user ${isolated(user)} has seen nothing in ${ns}.` : '';
}

/** The profile a user's filter was made with, from its stats. */
function ownProfile(st) {
  return { fp_rate: st.target_fp_rate, window: st.window, granularity: st.granularity, max_items: st.max_items };
}

/** One line on a profile: what bounds a user's history. */
function profileText(p) {
  if (!p) return '–';
  const parts = [`target ${pct(p.fp_rate)}`];
  parts.push(p.window ? `window ${seconds(p.window)} in buckets of ${seconds(p.granularity)}` : 'no window');
  parts.push(p.max_items ? `cap ${count(p.max_items, 'item')}` : 'no cap');
  return parts.join(' · ');
}

function day(ms) { return new Date(ms).toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' }); }

function summaryPanel(st, prof) {
  const ratio = st.target_fp_rate > 0 ? st.fp_rate / st.target_fp_rate : 0;
  const scale = Math.max(st.fp_rate, st.target_fp_rate) || 1;
  const fpBar = (label, v, id, warn) => h('div', { class: 'barrow' }, h('span', {}, label),
    h('div', { class: `bar${warn ? ' warn' : ''}`, role: 'img', 'aria-label': `${label} ${pct(v)}` }, h('span', { style: `width:${((v / scale) * 100).toFixed(1)}%` })),
    h('span', { class: 'pct', id }, pct(v)));
  return h('section', { class: 'panel', 'aria-labelledby': 'sum-h' },
    h(USER_PANEL, { id: 'sum-h' }, 'Filter'),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Items recorded'), h('dd', { id: 'user-items' }, num(st.items)),
      // The filter's own profile bounds its history; a namespace whose profile changed since
      // (a reload, a restart with another file) gives new users another one, said beside it.
      h('dt', {}, 'Profile'), h('dd', { id: 'user-profile' }, profileText(ownProfile(st)),
        prof && profileText(prof) !== profileText(ownProfile(st))
          ? h('span', { class: 'muted', id: 'user-profile-ns' }, ` (made before a change: new users of ${prof.name} get ${profileText(prof)})`) : null),
      h('dt', {}, 'Kind'), h('dd', {}, st.kind),
      h('dt', {}, 'Layers'), h('dd', { id: 'user-layers' }, num(st.layers)),
      layerRows(st),
      h('dt', {}, 'Bytes'), h('dd', { id: 'user-bytes' }, `${bytes(st.encoded_bytes)} encoded · ${bytes(st.memory_bytes)} in memory`),
      h('dt', {}, 'First seen'), h('dd', { id: 'user-first' }, when(st.first_seen, toMinute)),
      h('dt', {}, 'Last seen'), h('dd', { id: 'user-last' }, when(st.last_seen, toMinute))),
    h(USER_PART, {}, 'False-positive rate'), // a part of the filter's panel, under its heading
    h('div', { class: 'fp' }, fpBar('Now', st.fp_rate, 'user-fp', ratio > 1), fpBar('Target', st.target_fp_rate, 'user-fp-target', false)),
    h('p', { class: ratio > 1 ? 'note' : 'muted', id: 'user-fp-ratio' },
      ratio > 1 ? `Above target: ${ratio.toFixed(1)}× the target rate.` : `${pct(ratio, 0)} of the target rate.`));
}

/**
 * A layer of fingerprints (a compact filter's, or a staged filter's newest) keeps one an item
 * and has no hashes: its bits_set are its items, not bits of a bit array (LayerStats).
 */
function fingerprints(l) { return l.hashes === 0; }

/**
 * The summary's rows of the filter's bits, by the kind of the layers holding them: the bits set
 * of its Bloom layers, and the fingerprints of its layers of fingerprints. A staged filter has
 * both, and its bits_set adds fingerprints to bits, which no one label fits.
 */
function layerRows(st) {
  const kinds = { bloom: { layers: 0, bits: 0, set: 0 }, fp: { layers: 0, bits: 0, set: 0 } };
  for (const g of st.generations || []) {
    for (const l of g.layers || []) {
      const k = fingerprints(l) ? kinds.fp : kinds.bloom;
      k.layers++; k.bits += l.bits; k.set += l.bits_set;
    }
  }
  const both = kinds.bloom.layers > 0 && kinds.fp.layers > 0;
  return [
    kinds.bloom.layers ? [h('dt', { id: 'user-bits-label' }, 'Bits set'),
      h('dd', { id: 'user-bits' }, `${num(kinds.bloom.set)} of ${num(kinds.bloom.bits)}`,
        both ? ` · ${count(kinds.bloom.layers, 'Bloom layer')}` : '')] : null,
    kinds.fp.layers ? [h('dt', { id: 'user-fingerprints-label' }, 'Fingerprints'),
      h('dd', { id: 'user-fingerprints' }, `${num(kinds.fp.set)} in ${count(kinds.fp.bits, 'bit')}`,
        both ? ` · ${count(kinds.fp.layers, 'layer')} of fingerprints` : '')] : null,
  ];
}

function layersPanel(st) {
  const gens = st.generations || [];
  // The filter's own window decides when its buckets expire, not its namespace's.
  const windowed = gens.length > 1 || (gens[0] && gens[0].bucket !== 0) || !!st.window;
  const at = (ms, cls) => h('time', { class: cls, datetime: new Date(ms).toISOString() }, day(ms));
  const genTitle = (g) => {
    const start = new Date(g.start).getTime();
    if (!st.window) return [`Bucket ${g.bucket} from `, at(start, 'start'), ` · ${count(g.items, 'item')}`];
    const end = start + st.granularity * 1000;
    return ['Seen ', at(start, 'start'), ' – ', at(end, 'end'), ` · ${count(g.items, 'item')} · unseen again from `,
      at(end + st.window * 1000, 'expires')];
  };
  return h('section', { class: 'panel', 'aria-labelledby': 'layers-h', id: 'layers' },
    h(USER_PANEL, { id: 'layers-h' }, windowed ? 'Generations and layers' : 'Layers'),
    gens.length ? gens.map((g) => h('div', { class: 'generation' },
      windowed ? h(USER_PART, { class: 'gen' }, genTitle(g)) : null,
      (g.layers || []).map((l, i) => h('div', { class: 'barrow layer' },
        h('span', {}, `Layer ${i + 1}`),
        // A layer of fingerprints fills with its items against its capacity; a Bloom layer's
        // fill is its bits set against its bits.
        h('div', { class: 'bar', role: 'img', 'aria-label': fingerprints(l)
          ? `layer ${i + 1}, of fingerprints, ${pct(l.fill, 1)} of its capacity` : `layer ${i + 1}, Bloom, ${pct(l.fill, 1)} of its bits set` },
        h('span', { style: `width:${Math.min(100, l.fill * 100).toFixed(1)}%` })),
        h('span', { class: 'pct' }, pct(l.fill, 1)),
        h('span', { class: 'layer-detail' }, fingerprints(l)
          ? `Fingerprints: ${num(l.items)} of ${count(l.capacity, 'item')}, a fingerprint an item, in ${count(l.bits, 'bit')} · FP ${pct(l.fp_rate)}`
          : `Bloom: ${num(l.items)} of ${count(l.capacity, 'item')} · ${num(l.bits_set)} of ${count(l.bits, 'bit')} set · ${count(l.hashes, 'hash', 'hashes')} · FP ${pct(l.fp_rate)}`)))))
      : h('p', { class: 'muted' }, 'No layers: the filter is empty.'));
}

function actionPanel(id, title, text, op, buttonText, onrun, danger) {
  const ta = h('textarea', { id: `${id}-items`, name: 'items', spellcheck: 'false', 'aria-describedby': `${id}-help` });
  const result = resultBox(id);
  const button = h('button', { type: 'submit', id: `${id}-run`, 'data-op': op, class: danger ? 'danger' : null }, buttonText);
  const form = h('form', { id: `${id}-form` },
    h('div', { class: 'field' }, h('label', { for: `${id}-items` }, 'Items, one per line'), ta),
    h('p', { class: 'muted', id: `${id}-help` }, text, ' Spaces are part of an item; a line of spaces alone is one only if an item follows it. ' +
      'Empty lines are skipped. Ctrl+Enter in the box sends them.'),
    actionRow(button));
  // Enter adds a line to the items; Ctrl+Enter (or ⌘+Enter) sends them, as the button does.
  ta.addEventListener('input', () => fieldError(ta, ''));
  ta.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter' || !(ev.ctrlKey || ev.metaKey)) return;
    ev.preventDefault();
    if (!button.disabled) form.requestSubmit(button);
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const { items, dropped } = parseItems(ta.value);
    const why = !items.length ? `Enter at least one item${dropped ? ': a line of spaces alone is one only when another item follows it' : ''}.`
      : overLimit(items);
    if (why) {
      put(result, h('p', { class: 'note' }, why));
      fieldError(ta, result.id);
      announce(why);
      ta.focus();
      return;
    }
    fieldError(ta, '');
    await whileBusy(button, async () => {
      put(result, h('p', { class: 'muted' }, 'Working…'));
      try {
        await onrun(items, result);
        // The outcome says what was not sent, once, with the rest of it (announce).
        const done = dropped && (document.getElementById(result.id) || result).querySelector('.done');
        if (done) { done.append(` ${skipped(dropped)}`); announce(done.textContent); }
      } catch (e) {
        // The service refused the items (a JSON pointer into them, or a body over its limit),
        // not the call: the box is tied to the problem.
        const refused = e.status === 413 || e.errors.some((x) => /^\/items(\/|$)/.test(x.pointer || ''));
        const box = problemBox(nameItems(e, items), buttonText);
        // A 413 made the page learn the service's limits again (see call): what they say of
        // these items, in the page's words, beside the service's.
        const why = e.status === 413 ? overLimit(items) : '';
        if (why) box.append(h('div', { class: 'hint' }, `The service's limits changed since the page learnt them. ${why}`));
        put(result, box);
        if (refused) fieldError(ta, result.id);
      }
    });
  });
  return h('section', { class: 'panel', 'aria-labelledby': `${id}-h` }, h(USER_PANEL, { id: `${id}-h` }, title), form, result);
}

/**
 * Why the items cannot be sent in one call, or '' when they can: the service refuses more items
 * than its limit, or a body of more bytes than its limit, whole (GET /v1/auth says both), so the
 * page says so before sending them. A limit not known (no answer from GET /v1/auth yet) leaves
 * the service to refuse them.
 */
function overLimit(items) {
  const { items: max, bodyBytes } = state.limits;
  if (max && items.length > max) {
    return `${count(items.length, 'item')} entered; the service takes at most ${num(max)} in one call. Send them in parts of ${num(max)} or fewer.`;
  }
  if (!bodyBytes) return '';
  // The body the call would send (see call): many long items can pass the limit, each under
  // the limit on one item's bytes.
  const size = new TextEncoder().encode(JSON.stringify({ items })).length;
  if (size <= bodyBytes) return '';
  const empty = JSON.stringify({ items: [] }).length; // what each part's body takes besides its items
  const parts = Math.ceil((size - empty) / Math.max(1, bodyBytes - empty));
  return `The ${count(items.length, 'item')} entered make a request body of ${count(size, 'byte')}; the service takes at most ` +
    `${count(bodyBytes, 'byte')}${bodyBytes >= 1024 ? ` (${bytes(bodyBytes)})` : ''} in one call (its --max-body-bytes): ` +
    `${count(size - bodyBytes, 'byte')} over. Send them in ${num(parts)} parts or more.`;
}

/**
 * Names the items a problem points at (/items/3) by their place among those entered and their
 * text, escaped as JSON so that a control character shows: item 4 ("a\tb").
 */
function nameItems(p, items) {
  const name = (n) => {
    const it = items[Number(n)];
    if (it === undefined) return null;
    // Bidi controls are escaped too: they would turn the text after them around.
    const text = JSON.stringify(it.length > 40 ? `${it.slice(0, 40)}…` : it)
      .replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    return `item ${num(Number(n) + 1)} (${text})`;
  };
  if (p.detail) p.detail = p.detail.replace(/(?:item )?\/items\/(\d+)/g, (m, n) => name(n) || m);
  p.errors = (p.errors || []).map((e) => {
    // The list as a whole (too many items): the box's items, not the body's JSON pointer.
    if (e.pointer === '/items') return { ...e, pointer: `the ${count(items.length, 'item')} entered` };
    const at = /^\/items\/(\d+)$/.exec(e.pointer || '');
    return at && name(at[1]) ? { ...e, pointer: name(at[1]) } : e;
  });
  return p;
}

function checkPanel(ns, user) {
  return actionPanel('check', 'Check items', 'Says whether each item was seen, recording nothing. False positives happen at the namespace\'s rate; false negatives never.',
    'checkSeen', 'Check', async (items, result) => {
      const r = await call('checkSeen', { ns, user }, { items });
      showDone(result, `${num(r.seen_count)} of ${num(items.length)} seen.`,
        h('ul', { class: 'results', 'aria-label': 'Check results' }, items.map((it, i) => h('li', {},
          h('span', {}, itemText(it)), h('span', { class: `tag ${r.seen[i] ? 'seen' : 'unseen'}` }, r.seen[i] ? 'seen' : 'not seen')))));
    });
}

function recordPanel(ns, user, reload, windowed) {
  return actionPanel('record', 'Record items', 'Marks the items seen for this user, as the recommender does when it shows them.',
    'recordSeen', 'Record', async (items, result) => {
      const r = await call('recordSeen', { ns, user }, { items });
      await reload();
      // The items sent count once each; one that tested seen against an item this same call
      // added before it (a false positive) is neither recorded nor counted seen. With a window,
      // one seen only in an earlier time bucket is recorded again in the current one and counts
      // in both (SeenResponse): the counts then add up to more than the items sent, by the
      // number of such items (less the false positives, rarer by far). Counts that do not say
      // so are not taken for it: an item seen in the current bucket is not recorded again.
      const sent = new Set(items).size;
      const again = windowed ? Math.max(0, r.recorded + r.seen_count - sent) : 0;
      const rest = sent - r.recorded - r.seen_count;
      const msg = `Recorded ${num(r.recorded)}${again ? '' : ' new'}, ${num(r.seen_count)} already seen` +
        (again ? `: ${num(again)} of those ${again === 1 ? 'was' : 'were'} seen only in an earlier time bucket of the window, so ${again === 1 ? 'is' : 'are'} recorded again in the current one and counted in both` : '') +
        (r.saturated ? '; the user is at the item cap, some were not recorded.'
          : rest > 0 ? `; ${num(rest)} more tested seen against items recorded before them in this call (false positives, at the filter's rate), so were not added.` : '.');
      showDone(document.getElementById(result.id) || result, msg);
    });
}

function forgetPanel(ns, user, reload) {
  return actionPanel('forget', 'Forget items', 'Makes the items unseen again, e.g. impressions of a page that never reached the user. An item sharing a fingerprint with one of them is forgotten too, at most at the namespace\'s false-positive rate.',
    'forgetItems', 'Forget', async (items, result) => {
      const r = await call('forgetItems', { ns, user }, { items });
      await reload();
      const unseen = new Set(items).size - r.forgotten;
      const msg = `Forgot ${count(r.forgotten, 'item')}${unseen ? `; ${num(unseen)} of those given ${unseen === 1 ? 'was' : 'were'} not seen` : ''}.`;
      showDone(document.getElementById(result.id) || result, msg);
    });
}

/**
 * Downloads the user's encoded filter (GET .../export), which an import (PUT .../export) takes
 * into another service or namespace; the link it leaves saves it again.
 */
function exportPanel(ns, user) {
  const result = resultBox('export');
  const button = h('button', { type: 'button', id: 'export-run', 'data-op': 'exportUser' }, 'Download filter');
  let url = '';
  button.addEventListener('click', () => whileBusy(button, async () => {
    put(result, h('p', { class: 'muted' }, 'Working…'));
    try {
      const blob = await call('exportUser', { ns, user }, undefined, { blob: true });
      if (url) URL.revokeObjectURL(url);
      url = URL.createObjectURL(blob);
      const name = `${`${ns}-${user}`.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 120)}.filter`;
      const link = h('a', { href: url, download: name, id: 'export-link' }, name);
      showDone(result, [`Exported ${bytes(blob.size)}: `, link, '.']);
      link.click();
    } catch (e) {
      put(result, problemBox(e, 'Exporting'));
    }
  }));
  return buttonPanel('export', 'Export filter',
    'Downloads the user\'s encoded filter, with its changes not yet written back: an import (PUT …/export) takes it into another service, or into a user of a namespace of the same profile.',
    button, result);
}

function erasePanel(ns, user, reload) {
  const result = resultBox('erase');
  const open = h('button', { type: 'button', id: 'erase-open', class: 'danger', 'data-op': 'forgetUser' }, 'Erase user…');
  const dialog = eraseDialog('erase', 'Erase this user?',
    ['User ', h('code', {}, user), ' in ', h('code', {}, ns), ' will be erased from memory, the journal and disk. Every item becomes unseen again. This cannot be undone.'],
    () => whileBusy(open, async () => {
      try {
        // The erase says whether it found anything of the user (Data-Erased), so that a
        // mistyped id does not read as erased: the page's own look-up may be out of date by
        // then, the user recorded since.
        const r = await call('forgetUser', { ns, user }, undefined, { headers: true });
        await reload(); // draws the page again, this panel with it
        showDone(document.getElementById('erase-result') || result, r.headers.get('Data-Erased') === 'false'
          ? [h('bdi', {}, user), ` had no history in ${ns}: nothing to erase.`]
          : ['User ', h('bdi', {}, user), ` was erased from ${ns}.`]);
      } catch (e) {
        put(result, problemBox(e, 'Erasing'));
      }
    }));
  open.addEventListener('click', () => { put(result); dialog.showModal(); });
  return buttonPanel('erase', 'Erase user', 'Right to erasure: forget everything this user has seen in this namespace.', open, dialog, result);
}

// ---------- routing ----------

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  let parts;
  try { parts = raw.split('/').filter(Boolean).map(decodeURIComponent); } catch { return { view: 'bad' }; }
  if (parts.length === 0) return { view: 'overview' };
  if (parts[0] === 'ns' && parts.length === 1) return { view: 'namespaces' };
  // A user's address without its id (#/ns/default/users/, the id deleted) is its namespace's.
  if (parts[0] === 'ns' && (parts.length === 2 || (parts.length === 3 && parts[2] === 'users'))) return { view: 'users', ns: parts[1] };
  if (parts[0] === 'ns' && parts.length === 4 && parts[2] === 'users') return { view: 'users', ns: parts[1], user: parts[3] };
  if (parts[0] === 'users' && parts.length === 1) return { view: 'users' };
  return { view: 'bad' };
}

const VIEW_TITLES = { overview: 'Service overview', namespaces: 'Namespaces', users: 'User inspector', bad: 'Not a page of this dashboard' };

async function route() {
  const seq = ++state.seq;
  const r = parseHash();
  state.view = r.view;
  showUpdated();
  // Each view is named in the title, as its heading names it: the title is what a screen reader
  // says first of the page, and what the browser's tabs and history show. A user's page names
  // its user instead (renderInspector).
  document.title = `${VIEW_TITLES[r.view]} · seenapi`;
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === (r.view === 'bad' ? '' : r.view)) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const view = document.getElementById('view');
  try {
    switch (r.view) {
      case 'overview': renderOverview(view); break;
      case 'namespaces': await renderNamespaces(view, seq); break;
      case 'users': await renderInspector(view, seq, r.ns, r.user); break;
      default:
        put(view, h('h2', {}, VIEW_TITLES.bad),
          h('p', {}, 'The address ', h('code', {}, location.hash), ' names no page. Try the ', h('a', { href: '#/' }, 'overview'),
            ' or a user link such as ', h('code', {}, '#/ns/default/users/42'), '.'));
    }
  } catch (e) {
    put(view, h('h2', {}, 'Something went wrong'), problemBox(e instanceof Problem ? e : new Problem(0, { title: 'Dashboard error', detail: e.message })));
  }
}

// ---------- key ----------

/**
 * Why the page cannot send key, or '' when it can. A request header carries printable ASCII
 * here (fetch refuses what Latin-1 cannot write, and the service compares the key's UTF-8), and
 * a key holds no space: a character pasted with a key (a zero-width space, a curly quote) would
 * otherwise fail every call as if the service did not answer.
 */
function keyProblem(key) {
  // What a header, or a command line, puts before the key, pasted with it.
  const scheme = /^(?:Authorization:\s*)?Bearer\s+/i.exec(key);
  if (scheme) return `the key begins with "${scheme[0].trim()}", which the page puts before it itself: paste the key alone.`;
  const chars = [...key];
  const i = chars.findIndex((c) => c < '!' || c > '~');
  if (i < 0) return '';
  const c = chars[i] === ' ' ? 'a space' : `U+${chars[i].codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
  return `the key holds ${c} (its character ${i + 1}), which the page cannot send: a key is printable ASCII without spaces. Paste it again without it.`;
}

/**
 * The role a key entered begins with, as a line of a keys file ("write:KEY"), or ''. Such a key
 * is sent as entered (a key may hold a colon), and a 401 then says what it begins with.
 */
function keyRole(key) {
  const m = /^(read|write|admin):/i.exec(key);
  return m ? m[0] : '';
}

function setupKey() {
  const form = document.getElementById('key-form');
  const input = document.getElementById('key-input');
  const placeholder = () => { input.placeholder = state.key ? 'key in use (hidden)' : 'paste a key'; };
  placeholder();
  // The banner's error of the key goes as the key is changed; another problem there stays.
  input.addEventListener('input', () => { if (input.getAttribute('aria-invalid')) banner(null); });
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const k = input.value.trim();
    // Said in the banner tied to the field, as the key's other errors, not in the browser's
    // bubble, which a screen reader back in the field does not hear.
    const why = k ? keyProblem(k) : 'Paste a key first: the field is empty.';
    if (why) { banner(new Problem(0, { title: 'Key not used', detail: why })); fieldError(input, 'banner-detail'); input.focus(); return; }
    state.key = k;
    sessionStorage.setItem(KEY_STORE, k);
    input.value = '';
    placeholder();
    resetRole();
  });
  document.getElementById('key-forget').addEventListener('click', () => {
    state.key = '';
    sessionStorage.removeItem(KEY_STORE);
    input.value = '';
    placeholder();
    resetRole();
  });
}

function resetRole() {
  checkRole();
  banner(null);
  state.samples = [];
  state.statsError = null;
  state.namespaces = null;
  poll();
  route();
}

// ---------- start ----------

window.addEventListener('error', (ev) => banner(new Problem(0, { title: 'Dashboard error', detail: ev.message })));
window.addEventListener('unhandledrejection', (ev) => banner(ev.reason instanceof Problem ? ev.reason : new Problem(0, { title: 'Dashboard error', detail: String(ev.reason && ev.reason.message || ev.reason) })));
// The skip link's own address (#view) would be taken for a page's (route): it moves the focus alone.
document.querySelector('.skip').addEventListener('click', (ev) => { ev.preventDefault(); document.getElementById('view').focus(); });
window.addEventListener('hashchange', () => { document.getElementById('view').focus({ preventScroll: true }); route(); });
document.addEventListener('visibilitychange', () => { if (!document.hidden) poll(); });

setupKey();
checkRole();
route();
poll();
