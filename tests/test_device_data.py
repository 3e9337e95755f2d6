"""docs/device-data.md is generated from the field declarations of
fx2d_gpu/device/__init__.py, so it can't go stale: the committed page must equal the
generated one, and every field declares a doc. `python -m tests.test_device_data` writes
the page again after a declaration changes."""

from pathlib import Path

from fx2d_gpu import device

PAGE = Path(__file__).resolve().parents[1] / "docs" / "device-data.md"


def test_page_is_generated_from_the_declarations():
    assert PAGE.read_text(encoding="utf-8") == device.field_table(), (
        "docs/device-data.md is stale: run `python -m tests.test_device_data`"
    )


def test_every_field_has_a_doc_and_a_symbolic_shape():
    pool = device.DevicePool(device.MIN_CAPACITIES, dry_run=True)
    for name in device.GROUP_NAMES:
        for declaration in getattr(pool, name).declarations():
            assert declaration.doc.strip(), f"{name}.{declaration.name} has no doc"
            for dim in declaration.dims:
                assert not dim.symbol.isdigit(), f"{name}.{declaration.name}: {dim}"


def test_shape_symbols_name_sizes():
    size = device.Dim("n_pairs", 10) + device.Dim("n_joint_slots", 4)
    assert (2 * size) == device.Dim("2 * (n_pairs + n_joint_slots)", 28)
    assert device.Dim("n_slots", 5) + 1 == device.Dim("n_slots + 1", 6)


if __name__ == "__main__":
    PAGE.write_text(device.field_table(), encoding="utf-8")
    print(f"wrote {PAGE}")
