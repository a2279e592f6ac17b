// Volumetric data as a training Source, for the 3D U-Net and the Conv3D stack.
//
// Shapes: B batch, C channels, S the volume side (D = H = W = S).
//   input [B,C,S,S,S] float32, target [B,1,S,S,S] float32.
//
//   spheres     noisy ellipsoids and their 0/1 masks (data::SpheresDataset); C = 1.
//   mri         S^3 crops of one real T1 MRI volume and its brain mask (data::MriDataset);
//               C = 1; training crops and held-out crops come from disjoint slabs.
//   regression  noise in, smooth field out (data::synthetic_regression); any C.
//
// Every sample is a pure function of (seed, index). For the synthetic sets the training
// samples are indices [0, train_size) and the held-out ones [train_size, train_size +
// test_size): disjoint. An epoch visits the training samples in the order
// data::shuffled_indices(train_size, seed, epoch).
//
// Thread-safety: the methods are const and may be called from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/train/source.h"

namespace tandem::train {

// Where the MRI template and its brain mask are (Debian's mricron-data).
inline constexpr const char* kDefaultMriDir = "/usr/share/mricron/templates";

// `name`: spheres | mri | regression. `volume`: the side S. `mri_dir` empty: kDefaultMriDir
// (it must hold ch2.nii.gz and ch2bet.nii.gz). `normalization`: spheres and regression kNone
// (default) or kPerImage (each sample per channel); mri kPerImage over the scan's voxels > 0
// (default, data::head_standardized) or kNone; kDataset is refused (the generated sets have no
// fixed set to measure, the MRI is one scan). Throws tandem::Error for an unknown name, a
// volume < 1, channels < 1 (or != 1 for spheres and mri), train_size < 1, test_size < 0, and
// whatever the data set rejects (a crop larger than the MRI's slabs, unreadable files).
std::unique_ptr<Source> make_volume_source(const std::string& name, int volume, int64_t channels,
                                           uint64_t seed, int64_t train_size, int64_t test_size,
                                           const std::string& mri_dir = "",
                                           data::Normalization normalization = {});

// --data nifti:DIR: random volume^3 crops of a folder of image and label NIfTI files
// (data::NiftiFolder: the pairs, the held-out split by file, what a label means), for a model
// with `needs` (volumes; 0/1 masks or real targets). Training crops: train_size per epoch; held
// out: the last `test_files` files by name, test_size crops of them (none when test_files is 0).
// input [B,C,S,S,S] with the images' channels, target [B,1,S,S,S], standardized as
// `normalization` says (NiftiFolderOptions::normalization; default per image). The headers are
// read and checked now, the voxels by load() or the first batch. Throws tandem::Error naming the
// file.
std::unique_ptr<Source> make_nifti_source(const std::string& dir, const ModelNeeds& needs,
                                          int volume, int test_files, uint64_t seed,
                                          int64_t train_size, int64_t test_size,
                                          data::Normalization normalization = {});

}  // namespace tandem::train
