"""The view server driven by a real headless Chromium (selenium + Debian's
chromium-driver): `qcdemo plugins serve` with the example plugins and the
view-probe fixture; pages load and render, pluginHost.invoke / onPush /
getColorScheme / onColorSchemeChange work, a page cannot reach another
plugin or a file outside its folder, the CSP blocks an inline script the
page did not ship. Prints `views-browser: N passed, M failed` last.

Usage: python views_browser.py ROOT   (run by tests/views/run_views_browser.sh)
"""

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

ROOT = os.path.abspath(sys.argv[1])
DEMO = os.path.join(ROOT, "target/c/qcdemo")
ART = os.path.join(ROOT, "target/views")
PROBE = "test.view-probe"
TODO = "local.todo-quadrant"

results = []  # (name, ok, detail)


class Demo:
    """`qcdemo plugins serve`, its JSON lines and its stdin."""

    def __init__(self, plugins_dir, cwd, env):
        self.proc = subprocess.Popen(
            [DEMO, "plugins", "serve", "--dir", plugins_dir, "--cwd", cwd],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, text=True, bufsize=1,
        )
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            self.seen.append(doc)
            self.lines.put(doc)

    def send(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def wait(self, pred, what, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            try:
                doc = self.lines.get(timeout=max(0.05, end - time.time()))
            except queue.Empty:
                break
            if pred(doc):
                return doc
        raise AssertionError("no line: " + what)

    def wait_all(self, preds, what, timeout=20):
        """Waits for one line matching each predicate, in any order (events
        come from the library's callback thread, results from the main one)."""
        left = list(preds)
        end = time.time() + timeout
        while left and time.time() < end:
            try:
                doc = self.lines.get(timeout=max(0.05, end - time.time()))
            except queue.Empty:
                break
            left = [p for p in left if not p(doc)]
        if left:
            raise AssertionError("no line: " + what)

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.send("stop")
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def check(name):
    def wrap(fn):
        try:
            fn()
            results.append((name, True, ""))
            print("ok   " + name, flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            results.append((name, False, detail))
            print("FAIL " + name + ": " + detail, flush=True)
            traceback.print_exc()
        return fn
    return wrap


def http(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def wait_js(driver, expr, what, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        v = driver.execute_script("return (" + expr + ");")
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what + " (" + expr + ")")


def run_js(driver, body, timeout=30):
    """Runs async JS whose `done(value)` ends it."""
    driver.set_script_timeout(timeout)
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "(async () => {" + body + "})().then(done, (e) => done({thrown: String(e)}));"
    )


def chromium_pids(marker):
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def main():
    os.makedirs(ART, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="qc-views-browser-")
    env = dict(os.environ, QWEN_HOME=os.path.join(tmp, "home"))
    plugins = os.path.join(tmp, "plugins")
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    for src in ("examples/plugins/todo-quadrant", "examples/plugins/hello",
                "tests/plugins/fixtures/view-probe"):
        out = subprocess.run([DEMO, "plugins", "install", os.path.join(ROOT, src), "--dir", plugins],
                             env=env, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise SystemExit("install %s failed: %s %s" % (src, out.stdout, out.stderr))
    demo = Demo(plugins, ws, env)
    profile = os.path.join(tmp, "chromium-profile")
    driver = None
    service = None
    try:
        ready = demo.wait(lambda d: d.get("event") == "ready", "ready")
        views = {(v["plugin"], v["id"]): v for v in ready.get("views", [])}
        panels = {p["plugin"]: p for p in ready.get("panels", [])}

        @check("ready lists the views and panels")
        def _():
            assert set(views) == {(TODO, "quadrant"), (PROBE, "probe")}, ready
            assert set(panels) == {PROBE}, ready
            assert views[(TODO, "quadrant")]["title"] == "Todo Quadrant"
            for v in list(views.values()) + list(panels.values()):
                assert v["url"].startswith("http://127.0.0.1:"), v

        todo_url = views[(TODO, "quadrant")]["url"]
        probe_url = views[(PROBE, "probe")]["url"]
        panel_url = panels[PROBE]["url"]

        opts = webdriver.ChromeOptions()
        opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for a in ("--headless=new", "--no-sandbox", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic",
                  "--user-data-dir=" + profile, "--window-size=460,520",
                  "--disable-dev-shm-usage", "--no-first-run"):
            opts.add_argument(a)
        service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
        driver = webdriver.Chrome(service=service, options=opts)

        @check("the todo-quadrant view renders and invoke adds a todo")
        def _():
            driver.get(todo_url)
            wait_js(driver, "document.querySelectorAll('section.q').length === 4", "the quadrants")
            r = run_js(driver, "return await window.pluginHost.invoke('manage_todo_quadrant', "
                               "{action: 'add', content: 'Write the weekly report', "
                               "quadrant: 'urgent_important'});")
            assert "content" in r and "error" not in r, r
            run_js(driver, "return await window.pluginHost.invoke('manage_todo_quadrant', "
                           "{action: 'add', content: 'Plan the sprint', quadrant: 'important_not_urgent'});")
            # The ui_push 'todos' re-renders the grid.
            wait_js(driver, "document.body.innerText.includes('Write the weekly report') && "
                            "document.body.innerText.includes('Plan the sprint')", "the pushed todos")
            path = os.path.join(ART, "todo-quadrant-view.png")
            assert driver.save_screenshot(path), "screenshot"
            assert os.path.getsize(path) > 1000

        @check("the probe page: pluginHost is defined before the page's scripts")
        def _():
            driver.get(probe_url)
            wait_js(driver, "window.probeReady === true", "probe ready")
            assert driver.find_element(By.ID, "early").text == "true"
            assert driver.execute_script("return window.probeExternalLoaded === true;")
            assert driver.execute_script(
                "return typeof pluginHost.invoke === 'function' && typeof pluginHost.onPush === 'function'"
                " && typeof pluginHost.getColorScheme === 'function'"
                " && typeof pluginHost.onColorSchemeChange === 'function';")

        @check("invoke returns the plugin's result and its ui_push reaches onPush")
        def _():
            r = run_js(driver, "return await pluginHost.invoke('echo', {text: 'from the page'});")
            assert r == {"content": [{"type": "text", "text": "echo: from the page"}],
                         "details": {"text": "from the page"}}, r
            wait_js(driver, "window.pushes.some(p => p.channel === 'echo' && "
                            "p.payload.text === 'from the page')", "the push")
            assert "echo: " in driver.find_element(By.ID, "pushes").text

        @check("onPush's unsubscribe stops delivery")
        def _():
            r = run_js(driver, "const got = []; const off = pluginHost.onPush((c, p) => got.push(p.text));"
                               "await pluginHost.invoke('echo', {text: 'one'});"
                               "await new Promise(r => setTimeout(r, 300)); off();"
                               "await pluginHost.invoke('echo', {text: 'two'});"
                               "await new Promise(r => setTimeout(r, 300)); return got;")
            assert r == ["one"], r

        @check("invoke errors: a failing tool, another plugin's tool, bad params")
        def _():
            r = run_js(driver, "return await pluginHost.invoke('fail', {});")
            assert "probe failure" in r.get("error", ""), r
            r = run_js(driver, "return await pluginHost.invoke('say_hello', {name: 'x'});")
            assert r.get("kind") == "unknown_tool" and "error" in r, r
            r = run_js(driver, "return await pluginHost.invoke('echo', {text: 5});")
            assert r.get("kind") == "schema", r

        @check("getColorScheme / onColorSchemeChange follow `scheme dark` on the demo's stdin")
        def _():
            assert run_js(driver, "return await pluginHost.getColorScheme();") == "light"
            demo.send("scheme dark")
            res = demo.wait(lambda d: d.get("event") == "result" and d.get("command") == "scheme", "scheme result")
            assert res.get("ok") is True and res.get("colorScheme") == "dark", res
            wait_js(driver, "document.getElementById('scheme').textContent === 'dark'", "the scheme change")
            assert driver.execute_script("return document.body.className;") == "dark"
            assert run_js(driver, "return await pluginHost.getColorScheme();") == "dark"
            driver.save_screenshot(os.path.join(ART, "view-probe-dark.png"))
            demo.send("scheme blue")
            res = demo.wait(lambda d: d.get("event") == "result" and d.get("command") == "scheme", "scheme result")
            assert res.get("ok") is False, res
            demo.send("scheme light")
            demo.wait(lambda d: d.get("event") == "result" and d.get("command") == "scheme", "scheme result")
            wait_js(driver, "document.getElementById('scheme').textContent === 'light'", "back to light")

        @check("the CSP blocks an inline script the page did not ship")
        def _():
            assert driver.execute_script("return window.unownedRan === undefined;")
            v = driver.execute_script("return window.violations;")
            assert any(x["directive"].startswith("script-src") for x in v), v
            r = run_js(driver, "const s = document.createElement('script');"
                               "s.textContent = 'window.lateRan = true'; document.body.appendChild(s);"
                               "await new Promise(r => setTimeout(r, 200)); return window.lateRan === true;")
            assert r is False, r

        @check("a page cannot fetch another plugin's API or a file outside its folder")
        def _():
            r = run_js(driver, """
                const cap = location.pathname.split('/')[2];
                const other = cap.replace(/^./, c => c === 'a' ? 'b' : 'a');
                const st = async (u, init) => (await fetch(u, init)).status;
                const post = {method: 'POST', headers: {'Content-Type': 'application/json'},
                              body: JSON.stringify({toolName: 'manage_todo_quadrant', params: {action: 'list'}})};
                return {
                  wrongApi: await st('/api/' + other + '/invoke', post),
                  wrongEvents: await st('/api/' + other + '/events'),
                  byPluginId: await st('/v/local.todo-quadrant/view.html'),
                  dotdot: await st('/v/' + cap + '/../../v/x/manifest.json'),
                  encodedSlash: await st('/v/' + cap + '/..%2f..%2flocal.todo-quadrant%2fmanifest.json'),
                  encodedDots: await st('/v/' + cap + '/.%2e/.%2e/.%2e/.%2e/etc/passwd'),
                  outside: await st('/etc/passwd'),
                  own: await st('/v/' + cap + '/probe.css'),
                };""")
            assert r["own"] == 200, r
            for k, v in r.items():
                if k != "own":
                    assert v in (401, 403, 404), (k, r)
            assert r["wrongApi"] == 403 and r["wrongEvents"] == 403, r

        @check("a wrong or missing capability gets 401/403 outside the browser too")
        def _():
            base = probe_url.split("/v/")[0]
            cap = probe_url.split("/")[4]
            wrong = ("0" if cap[0] != "0" else "1") + cap[1:]
            assert http(probe_url.replace(cap, wrong))[0] == 403
            assert http(base + "/")[0] == 401
            assert http(base + "/api/" + wrong + "/scheme")[0] == 403
            body = json.dumps({"toolName": "echo", "params": {"text": "x"}}).encode()
            st, _ = http(base + "/api/" + cap + "/invoke", "POST", body,
                         {"Content-Type": "application/json", "Origin": "http://evil.example"})
            assert st == 403, st
            st, text = http(base + "/api/" + cap + "/invoke", "POST", body,
                            {"Content-Type": "application/json", "Origin": base})
            assert st == 200 and json.loads(text)["details"] == {"text": "x"}, (st, text)

        @check("the ui panel loads with pluginHost")
        def _():
            driver.get(panel_url)
            wait_js(driver, "document.getElementById('state').textContent === 'panel ready'", "the panel")

        @check("a notification with viewId carries the view's URL")
        def _():
            demo.send('call %s notify {"viewId":"probe"}' % PROBE)
            got = {}
            demo.wait_all([lambda d: d.get("event") == "host_request" and got.setdefault("req", d) is d,
                           lambda d: d.get("event") == "result" and d.get("command") == "call"
                           and got.setdefault("res", d) is d],
                          "host_request and the call result")
            req, res = got["req"], got["res"]
            assert req["params"]["view"] == {"id": "probe", "title": "View Probe", "url": probe_url}, req
            assert res.get("ok") is True, res

        @check("views follow disable/enable with views_changed")
        def _():
            for verb, status in (("disable", 404), ("enable", 200)):
                demo.send(verb + " " + PROBE)
                demo.wait_all([lambda d: d.get("event") == "views_changed",
                               lambda d, v=verb: d.get("event") == "result" and d.get("command") == v
                               and d.get("ok") is True],
                              "views_changed and the %s result" % verb)
                assert http(probe_url)[0] == status, verb
    finally:
        plugin_pids = [d["pid"] for d in demo.seen if d.get("event") == "plugin_started"]
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001
                pass
        if service is not None and service.process is not None and service.process.poll() is None:
            os.kill(service.process.pid, signal.SIGKILL)
        demo.stop()
        for pid in chromium_pids(profile):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

        @check("no plugin, demo or browser process is left")
        def _():
            assert demo.proc.returncode == 0, demo.proc.returncode
            assert plugin_pids, "no plugin_started event seen"
            end = time.time() + 5
            while time.time() < end and (any(alive(p) for p in plugin_pids) or chromium_pids(profile)):
                time.sleep(0.1)
            assert not [p for p in plugin_pids if alive(p)], plugin_pids
            assert not chromium_pids(profile), chromium_pids(profile)

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        results.append(("setup", False, "exception"))
    passed = sum(1 for r in results if r[1])
    failed = len(results) - passed
    print("views-browser: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed or not results else 0)
