"""The command line as a package: one registry of command modules, options declared once, grid
text parsed in `tuning/grid.py`. Cheap: no model is loaded."""

import re

import pytest

from workbench import cli
from workbench.cli.registry import COMMANDS, command_help
from workbench.errors import WorkbenchError
from workbench.tuning.grid import expand_grid, grid_from_text, parse_integers


def test_every_registered_command_is_parsed_and_runs_its_own_module():
    parser = cli._parser()
    choices = parser._subparsers._group_actions[0].choices
    assert list(choices) == list(COMMANDS)
    for name, command in COMMANDS.items():
        assert choices[name].get_default("run") is command.run
        assert command_help(command) and "\n" not in command_help(command)


@pytest.mark.parametrize(("name", "code"), [("validate", cli.EXIT_MISMATCH),
                                            ("check", cli.EXIT_MISMATCH),
                                            ("doctor", cli.EXIT_INTERNAL)])
def test_help_names_the_exit_code_the_command_returns(name, code):
    assert re.search(rf"\(exit {code} (on|when) ", command_help(COMMANDS[name]))


def test_shared_options_are_the_same_in_every_command_that_takes_them():
    parser = cli._parser()
    helps: dict[str, set[str]] = {}
    for sub in parser._subparsers._group_actions[0].choices.values():
        for action in sub._actions:
            for option in action.option_strings:
                helps.setdefault(option, set()).add(action.help or "")
    # (tune takes the conversion options as grid text, so their help differs there)
    for option in ("--debug", "--json", "--tags", "--outputs", "--prepare-for", "--atol",
                   "--rtol", "--target-batch-size"):
        assert len(helps[option]) == 1, (option, helps[option])


def test_grid_text_becomes_the_grid_tune_expands():
    grid = grid_from_text({"precision_mode": "FP32, FP16", "minimum_segment_size": "2,3 5",
                           "dynamic_shape_profile_strategy": "Range"}, denylists=["Relu,Add", ""])
    assert grid == {"precision_mode": ["FP32", "FP16"], "minimum_segment_size": [2, 3, 5],
                    "use_dynamic_shape": [True],  # a strategy implies explicit batch
                    "dynamic_shape_profile_strategy": ["Range"],
                    "denylist": [["Relu", "Add"], []]}
    assert len(expand_grid(grid)) == 2 * 3 * 2
    assert grid_from_text({"use_dynamic_shape": "off,on"}) == {"use_dynamic_shape": [False, True]}
    assert grid_from_text({}) == {}


@pytest.mark.parametrize(("texts", "message"), [
    ({"minimum_segment_size": "two"},
     "--minimum-segment-size takes whole numbers separated by commas, got 'two'"),
    ({"max_engines": "1.5"}, "--max-engines takes whole numbers separated by commas"),
    ({"use_dynamic_shape": "off,maybe"},
     "--use-dynamic-shape takes off, on or off,on; got 'maybe'"),
])
def test_bad_grid_text_says_which_option_and_what_it_takes(texts, message):
    names = {"minimum_segment_size": "--minimum-segment-size", "max_engines": "--max-engines",
             "use_dynamic_shape": "--use-dynamic-shape"}
    with pytest.raises(WorkbenchError, match=re.escape(message)):
        grid_from_text(texts, names=names)
    with pytest.raises(WorkbenchError, match="minimum_segment_size takes whole numbers"):
        parse_integers("minimum_segment_size", "3, x")
