"""Reading a page's shell blocks and running them in one bash, as a reader's terminal does."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpo_devenv.doc_shell import (
    ShellBlockError,
    ShellSession,
    interrupt,
    shell_blocks,
    start_in_terminal,
    wait_for_output,
)

PAGE = """\
# Title

```sh
echo top
```

## Part one

<!-- test: second-terminal ready="listening on" -->
```sh
server --port 1
```

1. A step in a list:

    ```bash
    export A=1
      indented
    ```

```python
print("not shell")
```

```text
not shell either
```

~~~sh
# ## not a heading
~~~

## Part two

<!-- a comment that is no marker -->
```sh
echo two
```
"""


def test_blocks_keep_their_section_marker_and_line() -> None:
    blocks = shell_blocks(PAGE)
    assert [b.text for b in blocks] == [
        "echo top\n",
        "server --port 1\n",
        "export A=1\n  indented\n",
        "# ## not a heading\n",
        "echo two\n",
    ]
    assert [b.section for b in blocks] == ["Title", "Part one", "Part one", "Part one", "Part two"]
    assert [b.marker for b in blocks] == ["", "second-terminal", "", "", ""]
    assert blocks[1].args == {"ready": "listening on"}
    assert [b.line for b in blocks] == [3, 10, 16, 29, 36]


def test_session_keeps_variables_directory_and_jobs_between_blocks(tmp_path: Path) -> None:
    session = ShellSession(tmp_path / "s", tmp_path, {"GIVEN": "placeholder"}).start()
    try:
        session.run("export X=1\nmkdir sub && cd sub\nsleep 60 >/dev/null &\n")
        out = session.run('echo "$X $GIVEN $(basename "$PWD")"\njobs | wc -l\n')
        assert out.splitlines()[-2:] == ["1 placeholder sub", "1"]
        assert out.startswith('$ echo "$X $GIVEN')  # the block is shown as typed
        session.run("kill %1\n")
    finally:
        session.stop()


def test_a_failing_command_ends_the_session_with_its_output(tmp_path: Path) -> None:
    session = ShellSession(tmp_path / "s", tmp_path, {}).start()
    try:
        with pytest.raises(ShellBlockError, match=r"(?s)exited with code 3.*before") as info:
            session.run("echo before\n(exit 3)\necho after\n")
        assert "\nafter" not in str(info.value)
        with pytest.raises(ShellBlockError, match="exited"):
            session.run("echo again\n", timeout_s=5)
    finally:
        session.stop()


def test_a_block_that_does_not_finish_is_reported(tmp_path: Path) -> None:
    session = ShellSession(tmp_path / "s", tmp_path, {}).start()
    try:
        with pytest.raises(ShellBlockError, match="not done after 1 s"):
            session.run("echo waiting\nsleep 30\n", timeout_s=1)
    finally:
        session.stop()
    assert not session.process.is_running()


def test_second_terminal_waits_for_its_line_and_ctrl_c_stops_it(tmp_path: Path) -> None:
    script = "trap 'echo bye; exit 0' INT\necho listening on 1\nwhile :; do sleep 0.1; done\n"
    terminal = start_in_terminal("server", script, tmp_path / "t.log", tmp_path, {})
    wait_for_output(terminal, "listening on", 10)
    assert interrupt(terminal, timeout_s=10) == 0
    assert terminal.log_tail().splitlines()[-1] == "bye"


def test_a_terminal_that_exits_before_its_line_is_reported(tmp_path: Path) -> None:
    terminal = start_in_terminal(
        "server", "echo no port; exit 2\n", tmp_path / "t.log", tmp_path, {}
    )
    with pytest.raises(ShellBlockError, match=r"(?s)exited with code 2.*no port"):
        wait_for_output(terminal, "listening on", 10)
