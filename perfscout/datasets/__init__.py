"""Datasets: validated loaders, deterministic synthetic fields and a named registry.

``get_dataset("vorticity.512_512")`` reads a shared real field in place,
``parse_synthetic("grf:64,64,64:f64")`` builds a synthetic one, and
``list_datasets()`` says what exists and what is available here;
``describe_file("era5.nc")`` lists a netCDF/HDF5/Zarr file's variables and
``load_variable("era5.nc", "z", dtype="f32")`` loads one, CF-decoded.
``open(parse_ref("field.npy"))`` reads what a dataset argument names, the one way the
CLI, sweeps and the agent all read data; ``describe(ref)`` sizes it without loading.
"""

from perfscout.datasets.field import (
    Field,
    dtype_tag,
    parse_dtype,
    parse_endian,
    parse_shape,
    shape_str,
    validate_array,
)
from perfscout.datasets.cf import MaskedValuesError
from perfscout.datasets.files import (
    VariableInfo,
    content_digest,
    describe_file,
    describe_variable,
    field_dtype,
    file_kind,
    load_variable,
)
from perfscout.datasets.loaders import load_hdf5, load_netcdf, load_npy, load_raw
from perfscout.datasets.ref import (
    DataInfo,
    DataRef,
    describe,
    file_ref,
    looks_like_file,
    masked_policy,
    open,
    parse_ref,
    synthetic_ref,
)
from perfscout.datasets.registry import (
    DatasetInfo,
    dataset_names,
    get_dataset,
    list_datasets,
    load_registry,
    shared_data_dir,
)
from perfscout.datasets.synthetic import SYNTHETIC_KINDS, parse_synthetic, synthetic

__all__ = [
    "DataInfo",
    "DataRef",
    "DatasetInfo",
    "dataset_names",
    "describe",
    "file_ref",
    "looks_like_file",
    "masked_policy",
    "open",
    "parse_ref",
    "synthetic_ref",
    "Field",
    "MaskedValuesError",
    "VariableInfo",
    "content_digest",
    "describe_file",
    "describe_variable",
    "field_dtype",
    "file_kind",
    "load_variable",
    "SYNTHETIC_KINDS",
    "dtype_tag",
    "get_dataset",
    "list_datasets",
    "load_hdf5",
    "load_netcdf",
    "load_npy",
    "load_raw",
    "load_registry",
    "parse_dtype",
    "parse_endian",
    "parse_shape",
    "parse_synthetic",
    "shape_str",
    "shared_data_dir",
    "synthetic",
    "validate_array",
]
