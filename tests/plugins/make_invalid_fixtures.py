# Regenerates tests/plugins/fixtures/invalid/: one folder per manifest rule,
# each with the manifest that breaks it and expect.json (the error paths).
# Run: python3 tests/plugins/make_invalid_fixtures.py
import json, os, copy, shutil
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'invalid')
shutil.rmtree(root, ignore_errors=True)
base = {
  "id": "com.example.invalid", "name": "Invalid", "version": "1.0.0", "main": "index.js",
  "tools": [
    {"name": "say_hello", "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    {"name": "list_modes", "parameters": {"type": "object"}}
  ]
}
def case(rule, expect, edit=None, raw=None, files=None, symlinks=None):
    d = os.path.join(root, rule); os.makedirs(d)
    with open(os.path.join(d, 'index.js'), 'w') as f: f.write("process.on('message', () => {});\n")
    if raw is not None:
        text = raw
    else:
        m = copy.deepcopy(base); edit(m); text = json.dumps(m, indent=2, ensure_ascii=False) + "\n"
    with open(os.path.join(d, 'manifest.json'), 'w') as f: f.write(text)
    for name in (files or []):
        with open(os.path.join(d, name), 'w') as f: f.write('<!doctype html>\n')
    for name, target in (symlinks or {}).items():
        os.symlink(target, os.path.join(d, name))
    with open(os.path.join(d, 'expect.json'), 'w') as f:
        json.dump({"errors": expect}, f, indent=2); f.write("\n")
def s(k, v): return lambda m: m.__setitem__(k, v)
def tool(i, k, v): return lambda m: m["tools"][i].__setitem__(k, v)
def drop_tool_key(i, k): return lambda m: m["tools"][i].pop(k)
case("json-trailing-comma", [""], raw='{\n  "id": "com.example.invalid",\n}\n')
case("json-comment", [""], raw='{\n  // a comment\n  "id": "com.example.invalid"\n}\n')
case("json-duplicate-key", [""], raw='{\n  "id": "com.example.invalid",\n  "id": "com.example.other"\n}\n')
case("not-an-object", [""], raw='["com.example.invalid"]\n')
case("id-one-label", ["/id"], s("id", "invalid"))
case("id-path-characters", ["/id"], s("id", "com.example/../evil"))
case("id-leading-dot", ["/id"], s("id", ".com.example"))
case("id-missing", ["/id"], lambda m: m.pop("id"))
case("name-empty", ["/name"], s("name", ""))
case("version-leading-v", ["/version"], s("version", "v1.0.0"))
case("version-two-numbers", ["/version"], s("version", "1.0"))
case("description-not-string", ["/description"], s("description", ["x"]))
case("icon-missing-file", ["/icon"], s("icon", "icon.png"))
case("main-missing-file", ["/main"], s("main", "missing.js"))
case("main-absolute", ["/main"], s("main", "/bin/sh"))
case("main-escapes-folder", ["/main"], s("main", "../hello/index.js"))
case("main-symlink-outside", ["/main"], s("main", "link.js"), symlinks={"link.js": "../../hello/index.js"})
case("main-is-directory", ["/main"], s("main", "lib"), files=[])
os.makedirs(os.path.join(root, "main-is-directory", "lib"))
case("permissions-not-array", ["/permissions"], s("permissions", "filesystem"))
case("permission-not-string", ["/permissions/1"], s("permissions", ["filesystem", 7]))
case("tools-not-array", ["/tools"], s("tools", {"say_hello": {}}))
case("tool-name-invalid", ["/tools/0/name"], tool(0, "name", "say hello"))
case("tool-name-too-long", ["/tools/0/name"], tool(0, "name", "x" * 65))
case("tool-name-duplicate", ["/tools/1/name"], tool(1, "name", "say_hello"))
case("parameters-missing", ["/tools/0/parameters"], drop_tool_key(0, "parameters"))
case("parameters-not-object-type", ["/tools/0/parameters/type"], tool(0, "parameters", {"type": "array"}))
case("parameters-meta-invalid", ["/tools/0/parameters/properties/name/type", "/tools/0/parameters/required"],
     tool(0, "parameters", {"type": "object", "properties": {"name": {"type": "strin"}}, "required": "name"}))
case("parameters-unknown-schema", ["/tools/0/parameters/$schema"],
     tool(0, "parameters", {"$schema": "https://example.com/my-meta", "type": "object"}))
case("annotations-unknown-key", ["/tools/0/annotations/title"], tool(0, "annotations", {"readOnlyHint": True, "title": "x"}))
case("annotations-not-boolean", ["/tools/0/annotations/destructiveHint"], tool(0, "annotations", {"destructiveHint": "no"}))
case("document-parser-bad-mime", ["/documentParsers/0/mimeType"], s("documentParsers", [{"mimeType": "markdown", "toolName": "parse_md"}]))
case("document-parser-duplicate-mime", ["/documentParsers/1/mimeType"],
     s("documentParsers", [{"mimeType": "text/markdown", "toolName": "parse_md"}, {"mimeType": "Text/Markdown", "toolName": "parse_md2"}]))
case("document-parser-bad-tool-name", ["/documentParsers/0/toolName"], s("documentParsers", [{"mimeType": "text/plain", "toolName": "parse md"}]))
case("ui-entry-missing-file", ["/ui/entry"], s("ui", {"entry": "ui.html", "title": "Panel"}))
case("ui-not-object", ["/ui"], s("ui", "ui.html"))
case("view-id-duplicate", ["/views/1/id"],
     s("views", [{"id": "board", "entry": "view.html"}, {"id": "board", "entry": "view.html"}]), files=["view.html"])
case("view-width-not-positive", ["/views/0/width"], s("views", [{"id": "board", "entry": "view.html", "width": 0}]), files=["view.html"])
case("view-entry-outside", ["/views/0/entry"], s("views", [{"id": "board", "entry": "../hello/manifest.json"}]))
case("session-action-unknown-tool", ["/sessionAction/tool", "/sessionAction/visibleTool"],
     s("sessionAction", {"tool": "ghost", "visibleTool": "phantom"}))
case("config-type-unknown", ["/configuration/0/type"], s("configuration", [{"id": "mode", "type": "enum", "defaultValue": "a"}]))
case("config-default-wrong-type", ["/configuration/0/defaultValue"], s("configuration", [{"id": "verbose", "type": "boolean", "defaultValue": "false"}]))
case("config-default-missing", ["/configuration/0/defaultValue"], s("configuration", [{"id": "limit", "type": "number"}]))
case("config-options-tool-on-boolean", ["/configuration/0/optionsTool"],
     s("configuration", [{"id": "verbose", "type": "boolean", "defaultValue": False, "optionsTool": "list_modes"}]))
case("config-options-tool-unknown", ["/configuration/0/optionsTool"],
     s("configuration", [{"id": "mode", "type": "select", "defaultValue": "auto", "optionsTool": "ghost"}]))
case("config-duplicate-id", ["/configuration/1/id"],
     s("configuration", [{"id": "mode", "type": "string", "defaultValue": ""}, {"id": "mode", "type": "number", "defaultValue": 1}]))
case("command-unknown-tool", ["/commands/0/tool"], s("commands", [{"tool": "ghost", "title": "Ghost"}]))
case("keybinding-bad-key", ["/keybindings/0/key"], s("keybindings", [{"command": "say_hello", "key": "mod+hyper+d"}]))
case("keybinding-two-keys", ["/keybindings/0/key"], s("keybindings", [{"command": "say_hello", "key": "mod+d+e"}]))
case("keybinding-duplicate", ["/keybindings/1/key"],
     s("keybindings", [{"command": "say_hello", "key": "mod+shift+d"}, {"command": "list_modes", "key": "shift+mod+D"}]))
case("keybinding-unknown-command", ["/keybindings/0/command"], s("keybindings", [{"command": "ghost", "key": "mod+g"}]))
case("menu-unknown-tool", ["/menus/session~1context/0/tool"], s("menus", {"session/context": [{"tool": "ghost"}]}))
case("menus-not-object", ["/menus"], s("menus", [{"tool": "say_hello"}]))
def many(m):
    m["id"] = "nodots"; m["version"] = "1"; m["tools"][1]["name"] = "bad name"; m["keybindings"] = [{"command": "say_hello", "key": "mod+"}]
case("many-problems-at-once", ["/id", "/version", "/tools/1/name", "/keybindings/0/key"], many)
print(len(os.listdir(root)))
