"""The README's Python examples run as written."""

import re
from pathlib import Path


def test_readme_examples_run(arch):
    text = (Path(__file__).parent.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    namespace = {}
    for block in blocks:
        exec(block.replace('arch="auto"', f'arch="{arch}"'), namespace)
    assert namespace["scene"].joint_state().position.shape == (64, 2)
