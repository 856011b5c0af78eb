-- qwen_companion.boot: everything the plugin does when it loads, in one
-- place, for both ways of loading it:
--   - plugin/qwen_companion.lua (the plugin on the runtimepath or in a
--     package: Neovim sources plugin/ before VimEnter), and
--   - setup() (lazy.nvim and other managers that do not source plugin/ of
--     examples/neovim, and run setup before VimEnter or later, when the
--     plugin is loaded lazily).
-- `load()` may run more than once (both ways at once): the commands are
-- redefined, the VimEnter autocmd replaced (one augroup, cleared), the
-- participant's hooks added once, and the companion started at most once.

local M = {}

local GROUP = 'QwenCompanionAutostart'

--- Whether autostart is asked for: setup{ autostart } or
--- vim.g.qwen_companion_autostart (1 or true).
function M.autostart_wanted()
  local m = package.loaded['qwen_companion']
  if type(m) == 'table' and m.config and m.config.autostart then
    return true
  end
  local g = vim.g.qwen_companion_autostart
  return g == 1 or g == true
end

--- Starts the companion if autostart is wanted and it is not running.
function M.autostart()
  if not M.autostart_wanted() then
    return
  end
  local qc = require('qwen_companion')
  if qc.status() then
    return
  end
  local ok, err = qc.start()
  if not ok then
    vim.notify('qwen-companion: ' .. tostring(err), vim.log.levels.ERROR)
  end
end

--- Before VimEnter: starts on VimEnter (one autocmd, whoever armed it
--- last). After VimEnter (a lazily loaded plugin): starts now.
function M.arm_autostart()
  if vim.v.vim_did_enter == 1 then
    M.autostart()
    return
  end
  vim.api.nvim_create_autocmd('VimEnter', {
    group = vim.api.nvim_create_augroup(GROUP, { clear = true }),
    once = true,
    callback = function()
      M.autostart()
    end,
  })
end

--- Every command: the core's (:QwenStart … :QwenInstall), the plugin UI's
--- and the cross-session participant's.
function M.define_commands()
  require('qwen_companion.commands').define()
  require('qwen_companion.extras').define()
end

--- The commands and the autostart.
function M.load()
  M.define_commands()
  M.arm_autostart()
end

return M
