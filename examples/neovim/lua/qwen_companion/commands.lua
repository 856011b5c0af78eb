-- qwen_companion.commands: the user commands, all under the prefix `Qwen`.
-- Defined by plugin/qwen_companion.lua and again by setup() (idempotent:
-- nvim_create_user_command replaces a command of the same name).
--
--   :QwenStart            start the companion (and the plugin host) for the cwd
--   :QwenStop             stop it
--   :QwenStatus           show its state
--   :QwenRun [args]       start the Qwen Code terminal (`terminal.cmd`, qwen) with the companion's env
--                         (or show and focus it when it runs)
--   :QwenToggle           show / focus / hide that terminal (start it when none runs)
--   :GeminiRun [args] / :GeminiToggle  the same for the Gemini CLI terminal (`gemini_command`, gemini)
--   :[range]QwenAdd [path]  type `@path` (with `(lines A-B)`) into the agent terminal used last, without Enter
--   :QwenCloseAllDiffs    reject every open diff and close their views
--   :QwenLog              open the log file
--   :QwenHealth           the library's health report and what Neovim knows
--   :QwenEnv [shell]      copy the lines that set that env in a shell outside Neovim
--   :QwenDiffAccept [path] / :QwenDiffReject [path]
--   :QwenInstall [prebuilt|source]  install the library and the bridge into lib/ (qwen_companion.install)
--
-- Other modules add theirs with the same prefix (`:QwenPlugin`, `:QwenSend`, ...).
-- The Gemini CLI terminal's two commands are named after it (`:Gemini*`).

local M = {}

local function qc()
  return require('qwen_companion')
end

local function report(ok, err)
  if not ok then
    vim.notify('qwen-companion: ' .. tostring(err), vim.log.levels.ERROR)
  end
  return ok
end

local function cmd(name, fn, opts)
  vim.api.nvim_create_user_command(name, fn, opts)
end

function M.define()
  cmd('QwenStart', function()
    if report(qc().start()) then
      local s = qc().status()
      vim.notify(string.format('qwen-companion: listening on 127.0.0.1:%d (%s)', s.port, s.root))
    end
  end, { desc = 'Start the Qwen Code IDE companion for the current directory' })

  cmd('QwenStop', function()
    report(qc().stop())
  end, { desc = 'Stop the Qwen Code IDE companion' })

  cmd('QwenStatus', function()
    local s = package.loaded['qwen_companion'] and qc().status()
    if s and s.plugins.mcp then
      s.plugins.mcp.headers = nil -- the bearer token is a secret
    end
    vim.notify('qwen-companion: ' .. (s and vim.inspect(s) or 'not running'))
  end, { desc = 'Show the Qwen Code IDE companion state' })

  cmd('QwenRun', function(a)
    report(require('qwen_companion.terminal').run(a.fargs))
  end, { nargs = '*', desc = 'Run Qwen Code in its terminal with the companion env (or focus it)' })

  cmd('QwenToggle', function()
    report(require('qwen_companion.terminal').toggle())
  end, { desc = 'Show, focus or hide the Qwen Code terminal (start it when none runs)' })

  cmd('GeminiRun', function(a)
    report(require('qwen_companion.terminal').run(a.fargs, 'gemini'))
  end, { nargs = '*', desc = 'Run Gemini CLI in its terminal with the companion env (or focus it)' })

  cmd('GeminiToggle', function()
    report(require('qwen_companion.terminal').toggle('gemini'))
  end, { desc = 'Show, focus or hide the Gemini CLI terminal (start it when none runs)' })

  cmd('QwenAdd', function(a)
    report(require('qwen_companion.prompt').add({
      path = a.args ~= '' and a.args or nil,
      range = a.range,
      line1 = a.line1,
      line2 = a.line2,
    }))
  end, {
    nargs = '?',
    range = true,
    complete = 'file',
    desc = 'Add the file (or the lines of a range) to the prompt: types @path into the Qwen Code or Gemini CLI terminal used last',
  })

  cmd('QwenCloseAllDiffs', function()
    local n, err = qc().close_all_diffs()
    if report(n, err) then
      vim.notify(string.format('qwen-companion: %d diff%s rejected and closed', n, n == 1 and '' or 's'))
    end
  end, { desc = "Reject every diff Qwen Code proposed and close their views" })

  cmd('QwenLog', function(a)
    require('qwen_companion.log').open(a.mods:find('vert') ~= nil)
  end, { desc = 'Open the qwen-companion log file' })

  cmd('QwenHealth', function()
    report(require('qwen_companion.health_report').show())
  end, { desc = "Show the library's health report (qwen, gemini, node, discovery files, CLIs, MCP, participant)" })

  cmd('QwenEnv', function(a)
    local lines, err = require('qwen_companion.terminal').env_lines(a.args ~= '' and a.args or nil)
    if report(lines, err) then
      local text = table.concat(lines, '\n') .. '\n'
      vim.fn.setreg('"', text)
      pcall(vim.fn.setreg, '+', text) -- no clipboard provider: the unnamed register has it
      vim.notify('qwen-companion: copied; run these in your shell, then qwen (or gemini):\n' .. text)
    end
  end, {
    nargs = '?',
    complete = function()
      return { 'posix', 'fish', 'powershell', 'cmd' }
    end,
    desc = 'Copy the lines that set the Qwen Code variables in a shell outside Neovim',
  })

  cmd('QwenDiffAccept', function(a)
    report(qc().accept(a.args))
  end, { nargs = '?', complete = 'file', desc = "Accept Qwen Code's proposed diff (with your edits)" })

  cmd('QwenDiffReject', function(a)
    report(qc().reject(a.args))
  end, { nargs = '?', complete = 'file', desc = "Reject Qwen Code's proposed diff" })

  cmd('QwenInstall', function(a)
    local method = a.args ~= '' and a.args or nil
    local inst = require('qwen_companion.install')
    local m, merr = inst.method({ method = method })
    if not report(m, merr) then
      return
    end
    vim.notify('qwen-companion: installing the library (' .. m .. ')')
    inst.run_async({
      method = m,
      progress = function(msg)
        vim.notify('qwen-companion: ' .. msg)
      end,
    }, function(dir, v)
      if report(dir, v) then
        local running = package.loaded['qwen_companion'] and qc().status()
        vim.notify(string.format('qwen-companion: installed version %s in %s%s', v, dir,
          running and ' (the running companion keeps the library it loaded: restart Neovim to use it)' or ''))
      end
    end)
  end, {
    nargs = '?',
    complete = function()
      return { 'prebuilt', 'source' }
    end,
    desc = 'Install the prebuilt library for this platform (or build it from source) into the plugin folder',
  })
end

return M
