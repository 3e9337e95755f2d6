"""The package's shape (benchmarks/structure.py, issue 73): layer folders with few modules on
top, no import circle, no import from a lower layer to a higher one, and no host function
too long to read at once."""

from benchmarks import structure


def test_the_package_is_laid_out_by_layer_without_circles_or_upward_imports():
    modules = structure.modules()
    assert len(structure.top_level_modules()) <= 12
    assert structure.import_circles(modules) == []
    assert structure.upward_imports(modules) == []


def test_no_host_function_is_longer_than_a_screen():
    host, _ = structure.long_functions(structure.modules())
    assert host == []


def test_tests_reach_paths_through_seams_not_patches():
    """Tests ask for a behaviour through the engine's own seams (StepOptions, TeamTimings,
    SceneFileLimits, injectable clocks and factories, launch counts): few monkeypatches,
    few reads of private members (issue 73)."""
    patches, private = structure.test_facts()
    assert len(patches) <= 10, patches
    assert len(set(private)) <= 10, sorted(set(private))
