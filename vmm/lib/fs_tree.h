/* fs_tree.h - removing a directory tree we made, safely (no symbolic link followed, no mount crossed). */
#ifndef MAYFLY_LIB_FS_TREE_H
#define MAYFLY_LIB_FS_TREE_H

/* Remove dir and everything under it, never following a symbolic link or
 * crossing a mount. 0 or -errno (the first failure; it goes on). */
int fs_remove_tree(const char *dir);

#endif
