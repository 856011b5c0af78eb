-- Qwen Code IDE companion for Neovim (LuaJIT FFI over libqwen_companion).
-- Defines the commands (all named :Qwen*) and the VimEnter autostart;
-- setup() does the same (lua/qwen_companion/boot.lua), so a plugin manager
-- that does not source this file (lazy.nvim) gets all of it from setup().
-- The modules behind the commands load on first use.
-- See :help qwen_companion and examples/neovim/README.md.

if vim.g.loaded_qwen_companion == 1 then
  return
end
vim.g.loaded_qwen_companion = 1

require('qwen_companion.boot').load()
