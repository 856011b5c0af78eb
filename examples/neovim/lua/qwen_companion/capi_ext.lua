-- qwen_companion.capi_ext: the C functions of the plugin UI (:QwenPlugin)
-- and of the cross-session participant (:QwenSessions, :QwenSend, …), in
-- their own block next to capi.lua's (same rules: copied verbatim from
-- include/qwen_companion.h, checked by tests/neovim/check_cdef.py, no
-- callback type, no callback setter).
--
-- The participant runs in the library's pull mode
-- (qc_participant_enable_events / qc_participant_next_event): messages,
-- receipts and hold-buffer changes are queued by the library and pulled on
-- Neovim's main loop; no Lua function ever runs on a library thread.
--
-- Every declaration is given to ffi.cdef on its own, so a function that
-- capi.lua (or a reload) declared already is skipped, not fatal.

local ffi = require('ffi')
local capi = require('qwen_companion.capi')

local M = {}

M.TYPES_CDEF = [[
typedef struct qc_participant qc_participant;
typedef struct qc_plugin_host qc_plugin_host;
]]

M.PARTICIPANT_CDEF = [[
qc_status qc_participant_new(const char *config_json, qc_participant **out, char **error);
qc_status qc_participant_free(qc_participant *p);
qc_status qc_participant_register(qc_participant *p,
                                  const char *options_json,
                                  char **out_session_json,
                                  char **error);
qc_status qc_participant_unregister(qc_participant *p, const char *session_id, char **error);
qc_status qc_participant_rotate_session_id(qc_participant *p,
                                           const char *session_id,
                                           const char *new_session_id,
                                           char **out_session_json,
                                           char **error);
qc_status qc_participant_sessions_json(const qc_participant *p, char **out_json, char **error);
qc_status qc_participant_list_json(const qc_participant *p, char **out_json, char **error);
qc_status qc_participant_send(qc_participant *p,
                              const char *options_json,
                              char **out_result_json,
                              char **error);
qc_status qc_participant_send_state_json(const qc_participant *p,
                                         const char *msg_id,
                                         char **out_json,
                                         char **error);
qc_status qc_participant_wait(qc_participant *p,
                              const char *msg_id,
                              uint32_t timeout_ms,
                              int32_t final_only,
                              char **out_json,
                              char **error);
qc_status qc_participant_held_json(const qc_participant *p, char **out_json, char **error);
qc_status qc_participant_release(qc_participant *p, const char *msg_id, char **error);
qc_status qc_participant_deny(qc_participant *p, const char *msg_id, char **error);
qc_status qc_participant_inbound_settings_json(const qc_participant *p,
                                               const char *session_id,
                                               char **out_json,
                                               char **error);
qc_status qc_participant_update_inbound(qc_participant *p,
                                        const char *session_id,
                                        const char *settings_json,
                                        char **error);
qc_status qc_participant_child_env_json(const qc_participant *p,
                                        const char *session_id,
                                        char **out_json,
                                        char **error);
qc_status qc_participant_enable_events(qc_participant *p, int32_t *out_fd, char **error);
qc_status qc_participant_enable_log_events(qc_participant *p, uint32_t max_level, char **error);
qc_status qc_participant_next_event(qc_participant *p, char **out_json, char **error);
]]

M.PLUGIN_HOST_CDEF = [[
qc_status qc_plugin_host_new(const char *config_json, qc_plugin_host **out, char **error);
qc_status qc_plugin_host_free(qc_plugin_host *h);
qc_status qc_plugin_host_plugins_dir(const qc_plugin_host *h, char **out, char **error);
qc_status qc_plugin_host_enable(qc_plugin_host *h, const char *id, char **error);
qc_status qc_plugin_host_disable(qc_plugin_host *h, const char *id, char **error);
qc_status qc_plugin_host_set_config_value(qc_plugin_host *h,
                                          const char *id,
                                          const char *key,
                                          const char *value_json,
                                          char **error);
qc_status qc_plugin_host_install(qc_plugin_host *h,
                                 const char *src_path,
                                 char **out_json,
                                 char **error_json,
                                 char **error);
qc_status qc_plugin_host_uninstall(qc_plugin_host *h,
                                   const char *id,
                                   int32_t remove_data,
                                   char **out_json,
                                   char **error_json,
                                   char **error);
qc_status qc_plugin_host_list(const qc_plugin_host *h,
                              char **out_json,
                              char **error_json,
                              char **error);
qc_status qc_plugin_host_call(qc_plugin_host *h,
                              const char *plugin_id,
                              const char *tool,
                              const char *params_json,
                              const char *options_json,
                              char **out_json,
                              char **error_json,
                              char **error);
qc_status qc_plugin_host_call_queued(qc_plugin_host *h,
                                     const char *plugin_id,
                                     const char *tool,
                                     const char *params_json,
                                     const char *options_json,
                                     uint64_t *out_call_id,
                                     char **error);
qc_status qc_plugin_host_visible(qc_plugin_host *h,
                                 const char *plugin_id,
                                 const char *cwd,
                                 int32_t *out,
                                 char **error_json,
                                 char **error);
qc_status qc_plugin_host_options(qc_plugin_host *h,
                                 const char *plugin_id,
                                 const char *config_id,
                                 char **out_json,
                                 char **error_json,
                                 char **error);
qc_status qc_plugin_host_parse_document(qc_plugin_host *h,
                                        const char *mime,
                                        const uint8_t *data,
                                        size_t len,
                                        char **out_json,
                                        char **error_json,
                                        char **error);
qc_status qc_plugin_host_enable_events(qc_plugin_host *h, int32_t *out_fd, char **error);
qc_status qc_plugin_host_next_event(qc_plugin_host *h, char **out_json, char **error);
qc_status qc_plugin_host_respond(qc_plugin_host *h,
                                 uint64_t request_id,
                                 const char *result_json,
                                 const char *error_message,
                                 char **error);
qc_status qc_plugin_host_offer_capability(qc_plugin_host *h, const char *name, char **error);
]]

--- The view server (the plugins' views and panels as loopback web pages).
M.VIEWS_CDEF = [[
qc_status qc_plugin_host_views_start(qc_plugin_host *h,
                                     const char *config_json,
                                     char **out_info_json,
                                     char **error);
qc_status qc_plugin_host_views_json(const qc_plugin_host *h, char **out_json, char **error);
qc_status qc_plugin_host_view_url(const qc_plugin_host *h,
                                  const char *plugin_id,
                                  const char *view_id,
                                  char **out_url,
                                  char **error);
qc_status qc_plugin_host_set_color_scheme(qc_plugin_host *h, const char *scheme, char **error);
]]

local declared = false

local function cdef_each(text)
  for decl in text:gmatch('[^;]+;') do
    if decl:find('%S') then
      local ok, err = pcall(ffi.cdef, decl)
      if not ok and not tostring(err):find('redefin', 1, true) then
        error(err)
      end
    end
  end
end

--- Declares the types and functions above once per Lua state.
function M.declare()
  if declared then
    return
  end
  capi.declare()
  for _, t in ipairs({ 'qc_participant', 'qc_plugin_host' }) do
    if not pcall(ffi.typeof, t) then
      ffi.cdef('typedef struct ' .. t .. ' ' .. t .. ';')
    end
  end
  cdef_each(M.PARTICIPANT_CDEF)
  cdef_each(M.PLUGIN_HOST_CDEF)
  cdef_each(M.VIEWS_CDEF)
  declared = true
end

--- Loads the library (capi.load, same cache) with these declarations too.
function M.load(path)
  M.declare()
  return capi.load(path or capi.library_path(nil))
end

--- `lib[name](args..., &out, &error)`: the owned out string (nil for NULL),
--- or nil, a message and the status (capi's, for callers of this module).
M.out_string = capi.out_string

--- `lib[name](args..., &out, &error)` with a JSON out: the decoded value,
--- or nil, a message and the status.
function M.out_json(lib, name, ...)
  local s, err, st = M.out_string(lib, name, ...)
  if s == nil then
    return nil, err, st
  end
  local ok, v = pcall(vim.json.decode, s, { luanil = { object = true, array = true } })
  if not ok then
    return nil, name .. ': bad JSON from the library: ' .. tostring(v)
  end
  return v
end

--- `lib[name](args..., &out, &error_json, &error)` (the plugin host's calls
--- with a machine-readable failure): the decoded out (or true when the
--- function has no out: `has_out` false), or nil, a message, the status and
--- the decoded error JSON (`{"kind"|"code","message",…}`).
function M.plugin_call(lib, name, has_out, ...)
  local out = ffi.new('char *[1]')
  local ej = ffi.new('char *[1]')
  local n = select('#', ...)
  local args = { ... }
  if has_out then
    args[n + 1] = out
    n = n + 1
  end
  args[n + 1] = ej
  local ok, msg, st = capi.call(lib, name, unpack(args, 1, n + 1))
  if not ok then
    local ejs = capi.take(lib, ej)
    local detail = nil
    if ejs then
      local dok, dv = pcall(vim.json.decode, ejs, { luanil = { object = true, array = true } })
      detail = dok and dv or nil
    end
    capi.take(lib, out)
    return nil, (detail and detail.message) or msg, st, detail
  end
  capi.take(lib, ej)
  if not has_out then
    return true
  end
  local s = capi.take(lib, out)
  if s == nil then
    return vim.NIL
  end
  local dok, v = pcall(vim.json.decode, s, { luanil = { object = true, array = true } })
  if not dok then
    return nil, name .. ': bad JSON from the library: ' .. tostring(v)
  end
  return v
end

return M
