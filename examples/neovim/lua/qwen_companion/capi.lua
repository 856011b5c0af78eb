-- qwen_companion.capi: the C ABI of libqwen_companion through LuaJIT's FFI.
--
-- The declarations below are copied from include/qwen_companion.h (the
-- authoritative header); tests/neovim/check_cdef.py fails when one of them no
-- longer matches the header. Only the functions this plugin calls are
-- declared. No callback type and no callback setter is declared: library
-- callbacks run on a library thread, where Neovim's Lua state must never run.
-- Diff requests are pulled instead (qc_companion_enable_events /
-- qc_companion_next_event / qc_companion_respond), on Neovim's main loop.

local ffi = require('ffi')

local M = {}

--- The ABI this binding was written for (QC_ABI_VERSION in the header).
M.ABI_VERSION = 1

--- Status codes (the header's QC_* table).
M.status = {
  QC_OK = 0,
  QC_NULL_PARAMETER = 1,
  QC_INVALID_UTF8 = 2,
  QC_INVALID_JSON = 3,
  QC_INVALID_ARGUMENT = 4,
  QC_INVALID_HANDLE = 5,
  QC_NOT_RUNNING = 6,
  QC_ALREADY_RUNNING = 7,
  QC_NOT_FOUND = 8,
  QC_IO = 9,
  QC_PANIC = 10,
  QC_INTERNAL = 11,
  QC_REFUSED = 12,
}

--- Log levels (QC_LOG_*).
M.log = { ERROR = 1, WARN = 2, INFO = 3, DEBUG = 4, TRACE = 5 }

--- The opaque handle and the status type.
M.TYPES_CDEF = [[
typedef struct qc_companion qc_companion;
typedef uint32_t qc_status;
]]

--- The functions the editor side calls.
M.FUNCTIONS_CDEF = [[
qc_status qc_companion_new(const char *config_json, qc_companion **out, char **error);
qc_status qc_companion_free(qc_companion *c);
qc_status qc_companion_start(qc_companion *c, char **error);
qc_status qc_companion_stop(qc_companion *c, char **error);
qc_status qc_companion_port(const qc_companion *c, uint16_t *out, char **error);
qc_status qc_companion_connected_clients(const qc_companion *c, uint32_t *out, char **error);
qc_status qc_companion_lock_file_path(const qc_companion *c, char **out, char **error);
qc_status qc_companion_terminal_env_json(const qc_companion *c, char **out, char **error);
qc_status qc_companion_discovery_files_json(const qc_companion *c, char **out, char **error);
qc_status qc_companion_set_workspace_roots_json(qc_companion *c,
                                                const char *roots_json,
                                                char **error);
qc_status qc_companion_file_opened(qc_companion *c, const char *path, char **error);
qc_status qc_companion_file_focused(qc_companion *c, const char *path, char **error);
qc_status qc_companion_file_closed(qc_companion *c, const char *path, char **error);
qc_status qc_companion_file_renamed(qc_companion *c,
                                    const char *old_path,
                                    const char *new_path,
                                    char **error);
qc_status qc_companion_set_cursor(qc_companion *c,
                                  const char *path,
                                  uint32_t line,
                                  uint32_t character,
                                  char **error);
qc_status qc_companion_set_selection(qc_companion *c,
                                     const char *path,
                                     const char *text,
                                     size_t len,
                                     char **error);
qc_status qc_companion_context_json(const qc_companion *c, char **out, char **error);
qc_status qc_companion_diff_accept(qc_companion *c,
                                   const char *path,
                                   const char *content,
                                   size_t len,
                                   char **error);
qc_status qc_companion_diff_reject(qc_companion *c, const char *path, char **error);
qc_status qc_companion_diff_closed(qc_companion *c, const char *path, char **error);
qc_status qc_companion_enable_events(qc_companion *c, int32_t *out_fd, char **error);
qc_status qc_companion_enable_log_events(qc_companion *c, uint32_t max_level, char **error);
qc_status qc_companion_next_event(qc_companion *c, char **out_json, char **error);
qc_status qc_companion_respond(qc_companion *c,
                               uint64_t id,
                               int32_t ok,
                               const char *text,
                               size_t len,
                               char **error);
const char *qc_version(void);
uint32_t qc_abi_version(void);
const char *qc_status_name(qc_status status);
void qc_string_free(char *s);
]]

--- The plugin host and its MCP server (N1: core). No callback setter: the
--- host runs in pull mode (qc_plugin_host_enable_events / _next_event /
--- _respond) like the companion.
M.PLUGIN_HOST_TYPES_CDEF = [[
typedef struct qc_plugin_host qc_plugin_host;
]]

M.PLUGIN_HOST_CDEF = [[
qc_status qc_plugin_host_new(const char *config_json, qc_plugin_host **out, char **error);
qc_status qc_plugin_host_free(qc_plugin_host *h);
qc_status qc_plugin_host_plugins_dir(const qc_plugin_host *h, char **out, char **error);
qc_status qc_plugin_host_list(const qc_plugin_host *h,
                              char **out_json,
                              char **error_json,
                              char **error);
qc_status qc_plugin_host_offer_capability(qc_plugin_host *h, const char *name, char **error);
qc_status qc_plugin_host_respond(qc_plugin_host *h,
                                 uint64_t request_id,
                                 const char *result_json,
                                 const char *error_message,
                                 char **error);
qc_status qc_plugin_host_enable_events(qc_plugin_host *h, int32_t *out_fd, char **error);
qc_status qc_plugin_host_enable_log_events(qc_plugin_host *h, uint32_t max_level, char **error);
qc_status qc_plugin_host_next_event(qc_plugin_host *h, char **out_json, char **error);
qc_status qc_plugin_host_mcp_start(qc_plugin_host *h, const char *config_json, char **error);
qc_status qc_plugin_host_mcp_stop(qc_plugin_host *h, char **error);
qc_status qc_plugin_host_mcp_info(const qc_plugin_host *h, char **out_json, char **error);
qc_status qc_mcp_register(const char *options_json, char **out_json, char **error);
qc_status qc_mcp_unregister(const char *options_json, char **out_json, char **error);
]]

--- The health report (:QwenHealth, :checkhealth). Any handle may be NULL.
M.HEALTH_TYPES_CDEF = [[
typedef struct qc_participant qc_participant;
]]

M.HEALTH_CDEF = [[
qc_status qc_health_json(const char *options_json,
                         const qc_companion *c,
                         const qc_plugin_host *h,
                         const qc_participant *p,
                         char **out_json,
                         char **error);
]]

local declared = false

--- Declares the C types and functions once per Lua state (a second
--- `ffi.cdef` of the same names would fail, e.g. after a plugin reload).
function M.declare()
  if declared then
    return
  end
  if not pcall(ffi.typeof, 'qc_companion') then
    ffi.cdef(M.TYPES_CDEF)
  end
  -- After a plugin reload (package.loaded cleared) the functions are already
  -- declared in this Lua state: the same text again is a harmless redefinition.
  if not pcall(ffi.typeof, 'qc_plugin_host') then
    ffi.cdef(M.PLUGIN_HOST_TYPES_CDEF)
  end
  if not pcall(ffi.typeof, 'qc_participant') then
    ffi.cdef(M.HEALTH_TYPES_CDEF)
  end
  for _, text in ipairs({ M.FUNCTIONS_CDEF, M.PLUGIN_HOST_CDEF, M.HEALTH_CDEF }) do
    local ok, err = pcall(ffi.cdef, text)
    if not ok and not tostring(err):find('redefine', 1, true) then
      error(err)
    end
  end
  declared = true
end

--- The plugin's own folder (the one holding lua/ and plugin/), absolute.
function M.plugin_root()
  local src = debug.getinfo(1, 'S').source
  if src:sub(1, 1) == '@' then
    src = src:sub(2)
  end
  return vim.fn.fnamemodify(src, ':p:h:h:h')
end

--- The file name of the library on this OS.
function M.library_file_name(os_name)
  return require('qwen_companion.platform').library_file_name(os_name)
end

--- Where a library next to the plugin is looked for, in order: `lib/` of
--- the plugin folder (a packaged install), then the crate's
--- `target/release/` when the plugin is `examples/neovim` of a checkout of
--- the repository (lazy.nvim's `build = "cargo build --release ..."`), then
--- `target/release/` of the plugin folder itself.
function M.bundled_library_candidates()
  local root, name = M.plugin_root(), M.library_file_name()
  local join = require('qwen_companion.platform').join
  return {
    join(join(root, 'lib'), name),
    join(join(join(vim.fn.fnamemodify(root, ':h:h'), 'target'), 'release'), name),
    join(join(join(root, 'target'), 'release'), name),
  }
end

--- The library path to load: `opt` (setup's `lib`), else
--- `vim.g.qwen_companion_lib`, else `$QWEN_COMPANION_LIB`, else the first
--- existing file of `bundled_library_candidates()`, else the bare name
--- `qwen_companion` (found through the dynamic linker's search path).
--- The second result says where the path came from.
function M.library_path(opt)
  local candidates = { opt, vim.g.qwen_companion_lib, os.getenv('QWEN_COMPANION_LIB') }
  local origin = { 'setup{ lib }', 'vim.g.qwen_companion_lib', '$QWEN_COMPANION_LIB' }
  for i = 1, 3 do -- not ipairs: a nil candidate must not end the search
    local p = candidates[i]
    if type(p) == 'string' and p ~= '' then
      return vim.fn.expand(p), origin[i]
    end
  end
  for _, p in ipairs(M.bundled_library_candidates()) do
    if vim.fn.filereadable(p) == 1 then
      return p, 'next to the plugin'
    end
  end
  return 'qwen_companion', "the dynamic linker's search path"
end

local loaded = {} -- path -> clib (a library stays loaded for the session)

--- Checks the library's ABI integer against the one this binding was
--- written for. Returns true, or nil and a message.
function M.check_abi(lib, expected)
  expected = expected or M.ABI_VERSION
  local got = tonumber(lib.qc_abi_version())
  if got ~= expected then
    return nil,
      string.format(
        'qwen-companion: the library has ABI %d, this plugin needs ABI %d (library version %s)',
        got,
        expected,
        ffi.string(lib.qc_version())
      )
  end
  return true
end

--- Loads the library at `path` and checks its ABI version.
--- Returns the clib namespace, or nil and an error message.
function M.load(path)
  M.declare()
  if loaded[path] then
    return loaded[path]
  end
  local ok, lib = pcall(ffi.load, path)
  if not ok then
    local where = ''
    if not require('qwen_companion.platform').is_absolute(path) then -- a bare name: say what was looked for
      where = string.format(' (looked for %s next to the plugin: %s, then in the dynamic linker\'s search path;'
        .. ' install it with :QwenInstall, or set setup{ lib } or $QWEN_COMPANION_LIB to its path)', M.library_file_name(),
        table.concat(M.bundled_library_candidates(), ', '))
    end
    return nil, string.format('qwen-companion: cannot load %s: %s%s', path, tostring(lib), where)
  end
  local abi_ok, abi_err = M.check_abi(lib)
  if not abi_ok then
    return nil, abi_err
  end
  loaded[path] = lib
  return lib
end

--- Calls `lib[name](...)` with a trailing `char **error` and turns a failure
--- into (nil, message, status). Returns true on success.
function M.call(lib, name, ...)
  local err = ffi.new('char *[1]')
  local n = select('#', ...)
  local args = { ... }
  args[n + 1] = err
  local st = tonumber(lib[name](unpack(args, 1, n + 1)))
  if st == 0 then
    return true
  end
  local msg
  if err[0] ~= nil then
    msg = ffi.string(err[0])
    lib.qc_string_free(err[0])
  end
  return nil, string.format('%s: %s%s', name, ffi.string(lib.qc_status_name(st)), msg and (': ' .. msg) or ''), st
end

--- M.call for a function newer libraries have: a library without it (older
--- than this plugin) gives nil and a message saying so instead of an error.
function M.optional_call(lib, name, ...)
  if not pcall(function()
    return lib[name]
  end) then
    return nil, name .. ': not in this library (older than the plugin; run :QwenInstall)'
  end
  return M.call(lib, name, ...)
end

--- The discovery file of each CLI the running companion `c` serves:
--- `{ qwen = path, gemini = path }` (a CLI not served has none), from
--- qc_companion_discovery_files_json. A library older than that function
--- (through optional_call) gives nil and a message.
function M.discovery_files(lib, c)
  local out = ffi.new('char *[1]')
  local ok, err = M.optional_call(lib, 'qc_companion_discovery_files_json', c, out)
  if not ok then
    return nil, err
  end
  local json = M.take(lib, out)
  local dok, v = pcall(vim.json.decode, json or '')
  if not dok or type(v) ~= 'table' then
    return nil, 'qc_companion_discovery_files_json: not a JSON object: ' .. tostring(json)
  end
  local files = {}
  for _, cli in ipairs({ 'qwen', 'gemini' }) do
    if type(v[cli]) == 'string' then
      files[cli] = v[cli]
    end
  end
  return files
end

--- Calls a getter `lib[name](c, &out, &error)` whose `out` is an owned
--- string; returns the Lua string, or nil and a message. A NULL `out` (an
--- empty event queue for qc_companion_next_event) gives nil without message.
function M.get_string(lib, name, c)
  return M.out_string(lib, name, c)
end

--- Takes an owned `char *` out of `cell` (nil for NULL), freeing it.
function M.take(lib, cell)
  if cell[0] == nil then
    return nil
  end
  local s = ffi.string(cell[0])
  lib.qc_string_free(cell[0])
  cell[0] = nil
  return s
end

--- Calls `lib[name](..., &out, &error)` (any leading arguments); returns the
--- owned out string (nil for NULL), or nil, a message and the status.
function M.out_string(lib, name, ...)
  local out = ffi.new('char *[1]')
  local n = select('#', ...)
  local args = { ... }
  args[n + 1] = out
  local ok, msg, st = M.call(lib, name, unpack(args, 1, n + 1))
  if not ok then
    return nil, msg, st
  end
  return M.take(lib, out)
end

--- Like `out_string` for functions with `(..., &out, &error_json, &error)`:
--- on a failure the fourth result is the decoded `error_json` (or nil).
function M.out_string_ej(lib, name, ...)
  local out, ej = ffi.new('char *[1]'), ffi.new('char *[1]')
  local n = select('#', ...)
  local args = { ... }
  args[n + 1], args[n + 2] = out, ej
  local ok, msg, st = M.call(lib, name, unpack(args, 1, n + 2))
  if not ok then
    local detail = M.take(lib, ej)
    local dok, decoded = pcall(vim.json.decode, detail or '')
    return nil, msg, st, dok and decoded or nil
  end
  M.take(lib, ej)
  return M.take(lib, out)
end

return M
