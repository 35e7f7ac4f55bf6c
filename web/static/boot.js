// A classic script, run before the dashboard's module: if the module cannot
// start (a file failed to load, a browser without ES modules), the page says
// so instead of staying blank.
setTimeout(function () {
  if (document.documentElement.getAttribute('data-started')) return;
  var el = document.getElementById('loading');
  if (!el) return;
  // The API is beside the page: a proxy may serve the service under a path prefix (/seen/).
  var here = location.pathname.replace(/[^/]*$/, '');
  el.className = 'problem';
  el.setAttribute('role', 'alert');
  el.textContent = 'The dashboard did not start: its scripts failed to load or run in this browser ' +
    '(the browser console says why). The API itself answers under ' + here + 'v1/; its contract is ' + here + 'openapi.yaml.';
}, 3000);
