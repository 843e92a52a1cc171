//! `vow completions SHELL`: the shell completion script for `vow`, generated from its
//! argument definitions (so it always matches this binary's commands and flags).

use clap::Args;
use clap_complete::Shell;

/// `vow completions`' arguments.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  vow completions bash > ~/.local/share/bash-completion/completions/vow
  vow completions zsh > \"${fpath[1]}/_vow\"
  vow completions fish > ~/.config/fish/completions/vow.fish")]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the completion script of `command` (the whole `vow` command) for `args.shell`.
pub fn run(args: &CompletionsArgs, command: &mut clap::Command) {
    clap_complete::generate(args.shell, command, "vow", &mut std::io::stdout());
}
