// The precompiled header target needs one source; the header is the point (CMakeLists.txt).
