// The one source of a precompiled-header maker (cmake/PrecompiledHeaders.cmake): the target
// exists to make its header, which every target of its flag set reuses.
