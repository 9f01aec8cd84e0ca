// A command in a pseudo-terminal: util-linux `script` (bsdutils, essential on Debian) runs it
// through $SHELL -c. So the shell is pinned (a CI machine may have no SHELL, or a login shell
// such as nologin) and every word is quoted (a checkout's path may hold a space).

/** One word for sh: 'it'\''s'. */
export const shellWord = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** argv as one sh command line. */
export const shellLine = (argv: readonly string[]): string => argv.map(shellWord).join(' ');

/** `script` arguments running `command` (sh syntax) in a fresh pseudo-terminal. */
export const scriptArgs = (command: string): string[] => ['-qfec', command, '/dev/null'];

/** The environment `script` needs besides the caller's: a POSIX shell it can run. */
export const TERMINAL_ENV = { SHELL: '/bin/sh' } as const;
