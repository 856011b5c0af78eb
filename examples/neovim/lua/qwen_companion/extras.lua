-- qwen_companion.extras: the plugin UI (:QwenPlugin) and the cross-session
-- commands (:QwenSessions, :QwenSend, :QwenSendQuickfix, :QwenMessages,
-- :QwenHeld, :QwenInboxPolicy), and the hooks that start the participant
-- with the companion. `define()` is called by qwen_companion.boot (from
-- plugin/qwen_companion.lua and from setup()); the commands are redefined
-- each time, the hooks are added once per Lua state. The modules behind the
-- commands load on first use. See examples/neovim/PLUGINS_AND_SESSIONS.md.

local M = {}

local cmd = vim.api.nvim_create_user_command
local hooked = false

local function ui()
  return require('qwen_companion.plugins_ui')
end
local function part()
  return require('qwen_companion.participant')
end

local function guarded(fn)
  return function(a)
    local ok, err = pcall(fn, a)
    if not ok then
      vim.notify('qwen-companion: ' .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

--- The extras' commands (every call) and hooks (the first call).
function M.define()
  cmd('QwenPlugin', guarded(function(a)
    ui().command(a)
  end), {
    nargs = '*',
    bang = true,
    complete = function(lead, line)
      local ok, res = pcall(ui().complete, lead, line)
      return ok and res or {}
    end,
    desc = 'Qwen plugins: list, install, uninstall, enable, disable, run, config, view, panel, parse',
  })

  cmd('QwenSessions', guarded(function()
    part().sessions_command()
  end), { desc = 'Send a message to a live Qwen session' })

  cmd('QwenSend', guarded(function(a)
    part().send_command(a)
  end), { nargs = '*', range = true, bang = true, desc = 'Send the selected lines (! with path:line) or a text to a Qwen session' })

  cmd('QwenSendQuickfix', guarded(function()
    part().send_quickfix_command()
  end), { desc = 'Send the quickfix list to a Qwen session' })

  cmd('QwenMessages', guarded(function()
    part().messages_command()
  end), { desc = 'Messages Qwen sessions sent to Neovim' })

  cmd('QwenHeld', guarded(function()
    part().held_command()
  end), { desc = 'Review held messages: release or deny' })

  cmd('QwenInboxPolicy', guarded(function(a)
    local ok, err = part().set_policy(a.args)
    vim.notify('qwen-companion: ' .. (ok and ('inbox policy ' .. a.args) or tostring(err)), ok and vim.log.levels.INFO or vim.log.levels.ERROR)
  end), {
    nargs = 1,
    complete = function()
      return { 'default', 'accept', 'hold', 'refuse' }
    end,
    desc = 'Inbox policy of the participant',
  })

  -- The participant joins when the companion starts and leaves when it stops
  -- (and on VimLeavePre); the plugin keybindings follow the plugin host.
  -- Uses the core's hooks (on_start / on_stop) when it has them.
  if hooked then
    return
  end
  hooked = true
  local core_ok, core = pcall(require, 'qwen_companion')
  local function started()
    local pok, ok, err = pcall(part().start)
    if not pok then
      ok, err = nil, ok
    end
    if not ok and part().config.enabled ~= false then
      vim.notify('qwen-companion: the cross-session participant did not start: ' .. tostring(err), vim.log.levels.WARN)
    end
    local host = core_ok and core.plugin_host and core.plugin_host()
    if host then
      ui().attach(host)
      if ui().config.keymaps then
        pcall(ui().apply_keybindings)
      end
    end
  end
  if core_ok and type(core.on_start) == 'function' then
    core.on_start(started)
    if type(core.on_stop) == 'function' then
      core.on_stop(function()
        part().stop()
      end)
    end
  end
  if core_ok and type(core.add_terminal_env) == 'function' then
    -- A qwen started in :QwenRun's terminal is Neovim's own child: its
    -- messages to Neovim arrive with origin `own-process`.
    core.add_terminal_env(function()
      return part().child_env()
    end)
  end
end

return M
